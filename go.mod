module github.com/farwing/farwing

go 1.26.0

require (
	github.com/klauspost/reedsolomon v1.14.2
	github.com/spf13/pflag v1.1.0
	github.com/zeebo/blake3 v0.2.4
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
	lukechampine.com/blake3 v1.4.1
)

require github.com/klauspost/cpuid/v2 v2.3.0 // indirect
