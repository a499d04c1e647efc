package bootstrap

import (
	"encoding/base64"
	"errors"
	"os/exec"
	"slices"
	"strings"
)

// The control channel's preface (the hello and a short file list) travels twice: on the peer's
// standard input, as always, and in its environment, with the exec request. sshd opens a session's
// input only once the command runs (OpenSSH gives the channel a window of zero until then), so
// standard input reaches the peer a round trip after it starts; the environment is there when it
// starts, and a push's receiver can say which files it has (its have) in the same flight as its
// ready (docs/PROTOCOL.md, "Preface"). The variable's name starts with LC_ because most systems'
// sshd accept those (Debian's and Fedora's sshd_config: AcceptEnv LANG LC_*); where sshd does
// not, the peer reads the preface from standard input alone. Standard input stays the authority:
// the peer checks that it begins with the very bytes the environment gave (xfer.EnvPrefaced).
const EnvPreface = "LC_FARWING_PREFACE"

// MaxEnvPreface bounds the preface that travels in the environment, encoded: a longer one goes
// on standard input only (its bytes would ride the exec request's segments, which the peer's
// start waits for).
const MaxEnvPreface = 8 << 10

// withEnvPreface sets cmd's environment's EnvPreface to preface, where it is short enough, and
// returns the ssh options that send it; it removes any EnvPreface cmd would inherit otherwise.
// The options are given where no preface is set too (they then send nothing): an ssh that makes a
// shared connection's master may be one whose preface was too long, and a session over that
// connection sends what the master's own options name (found on the lab by a helper session).
func withEnvPreface(cmd *exec.Cmd, preface []byte) []string {
	env := cmd.Environ()
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, EnvPreface+"=") })
	enc := base64.RawStdEncoding.EncodeToString(preface)
	if len(preface) != 0 && len(enc) <= MaxEnvPreface {
		env = append(env, EnvPreface+"="+enc)
	}
	cmd.Env = env
	return []string{"-o", "SendEnv=" + EnvPreface}
}

// DecodeEnvPreface reads EnvPreface's value: at most MaxEnvPreface characters of base64, whole
// lines of text. The peer still checks every message in it as it would on standard input.
func DecodeEnvPreface(v string) ([]byte, error) {
	if len(v) == 0 || len(v) > MaxEnvPreface {
		return nil, errors.New("empty or too long")
	}
	b, err := base64.RawStdEncoding.DecodeString(v)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, errors.New("not whole lines")
	}
	return b, nil
}
