// Command farwing copies files over long, lossy, fast networks. See README.md.
package main

import "os"

func main() { os.Exit(run(os.Args[1:])) }
