package main

import (
	_ "github.com/klauspost/reedsolomon"
	_ "github.com/spf13/pflag"
	_ "github.com/zeebo/blake3"
	_ "golang.org/x/net/ipv4"
	_ "golang.org/x/net/ipv6"
	_ "golang.org/x/sys/unix"
)

func main() {}
