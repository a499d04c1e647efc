package main

import "github.com/farwing/farwing/internal/xfer"

// Exit codes, listed in `farwing help` (usage).
const (
	exitOK          = 0
	exitFail        = 1  // anything not listed below
	exitUsage       = 2  // bad command line
	exitSource      = 3  // a source is missing, unreadable or a directory without -r
	exitDest        = 4  // the destination cannot be written
	exitSSH         = 5  // ssh/scp failed: unknown host, refused, authentication
	exitUDP         = 6  // no UDP path, or the path died mid-transfer
	exitVerify      = 7  // a block or file failed verification
	exitPlatform    = 8  // this build carries no peer for the remote's OS/architecture
	exitInstall     = 9  // the peer could not be installed on the remote host (its cache is not writable)
	exitProtocol    = 10 // the other end broke the protocol: an unsafe or unrequested name, a malformed message
	exitInterrupted = 130
)

// exitCodes is the exit code for each code of failure the transfer reports (xfer.CodeOf), which
// is also what an "error" message carries: each is the code's own number, so that a copy that
// ends with the remote peer's error exits with the code the peer sent, as the peer would.
var exitCodes = map[xfer.ErrorCode]int{
	xfer.CodeFail:        exitFail,
	xfer.CodeSource:      exitSource,
	xfer.CodeDest:        exitDest,
	xfer.CodeSSH:         exitSSH,
	xfer.CodeUDP:         exitUDP,
	xfer.CodeVerify:      exitVerify,
	xfer.CodePlatform:    exitPlatform,
	xfer.CodeInstall:     exitInstall,
	xfer.CodeProtocol:    exitProtocol,
	xfer.CodeInterrupted: exitInterrupted,
}

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if code, ok := exitCodes[xfer.CodeOf(err)]; ok {
		return code
	}
	return exitFail
}
