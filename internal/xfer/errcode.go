package xfer

import (
	"context"
	"errors"

	"github.com/farwing/farwing/bootstrap"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/session"
)

// ErrorCode is the code an "error" message carries: the kind of failure that made its sender stop
// (docs/PROTOCOL.md). The numbers are the protocol's, and a receiver keeps only those from
// CodeSource to CodeProtocol (any other reads as CodeFail). cmd/farwing exits with the number of
// the code (its exit.go): a copy that ends with its remote peer's error exits with the peer's code.
type ErrorCode int

// The codes of the "error" message.
const (
	CodeFail        ErrorCode = 1   // anything not listed below
	CodeSource      ErrorCode = 3   // a source is missing, unreadable or a directory without -r
	CodeDest        ErrorCode = 4   // the destination cannot be written
	CodeSSH         ErrorCode = 5   // ssh failed (unknown host, refused, authentication), or the control channel closed
	CodeUDP         ErrorCode = 6   // no UDP path (nor TCP streams, where the copy fell back to them), or the path died mid-transfer
	CodeVerify      ErrorCode = 7   // a block or file failed verification
	CodePlatform    ErrorCode = 8   // the client carries no peer for the remote's OS/architecture
	CodeInstall     ErrorCode = 9   // the peer could not be installed on the remote host
	CodeProtocol    ErrorCode = 10  // the other end broke the protocol: an unsafe or unrequested name, a malformed message
	CodeInterrupted ErrorCode = 130 // this end was interrupted (the receiver reads CodeFail)
)

// CodeOf is the code of the failure err reports: the one an "error" message about it carries. A
// remote peer's error keeps its own code; nil is 0.
func CodeOf(err error) ErrorCode {
	var re *RemoteError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &re) && re.Code != 0:
		return re.Code
	case errors.Is(err, context.Canceled):
		return CodeInterrupted
	case errors.Is(err, fcopy.ErrSource):
		return CodeSource
	case errors.Is(err, fcopy.ErrDest):
		return CodeDest
	case errors.Is(err, fcopy.ErrVerify):
		return CodeVerify
	case errors.Is(err, bootstrap.ErrPlatform):
		return CodePlatform
	case errors.Is(err, bootstrap.ErrInstall):
		return CodeInstall
	case errors.Is(err, ErrProtocol), errors.Is(err, fcopy.ErrName), errors.Is(err, fcopy.ErrTooLarge):
		return CodeProtocol
	case errors.Is(err, bootstrap.ErrSSH), errors.Is(err, ErrPeerGone):
		return CodeSSH
	case errors.Is(err, session.ErrNoUDP), errors.Is(err, session.ErrNoFeedback), errors.Is(err, session.ErrStalled),
		errors.Is(err, session.ErrSilent), errors.Is(err, session.ErrPortRange), errors.Is(err, session.ErrStreams):
		return CodeUDP
	}
	return CodeFail
}
