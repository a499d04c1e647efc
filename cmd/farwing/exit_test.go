package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/farwing/farwing/internal/xfer"
)

// TestExitCodes: every code an "error" message carries is the exit code of the same number, so a
// copy that ends with its remote peer's error exits with the code the peer sent; an interrupted
// command exits 130, any other failure 1.
func TestExitCodes(t *testing.T) {
	for code := range exitCodes {
		if got := exitCode(&xfer.RemoteError{Msg: "remote: x", Code: code}); got != int(code) {
			t.Errorf("a remote error of code %d exits %d", code, got)
		}
	}
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{fmt.Errorf("copy: %w", context.Canceled), exitInterrupted},
		{fmt.Errorf("%w: a malformed message", xfer.ErrProtocol), exitProtocol},
		{fmt.Errorf("anything else"), exitFail},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
