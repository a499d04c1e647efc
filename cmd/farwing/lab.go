package main

import (
	"context"
	"fmt"
)

func cmdLab(ctx context.Context, args []string) int {
	fmt.Fprintln(stderr, "farwing lab: not built yet")
	return 1
}
