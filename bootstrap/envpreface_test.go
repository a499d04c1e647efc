package bootstrap

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestEnvPreface: a short preface rides ssh's environment (one variable, sent with SendEnv), a
// long one does not (SendEnv is still given, for a shared connection's master), and an inherited
// variable of that name is never passed on; the peer's
// decoding takes back exactly what was sent and refuses what is too long, not base64 or not
// whole lines.
func TestEnvPreface(t *testing.T) {
	vars := func(cmd *exec.Cmd) (vals []string) {
		for _, kv := range cmd.Env {
			if v, ok := strings.CutPrefix(kv, EnvPreface+"="); ok {
				vals = append(vals, v)
			}
		}
		return vals
	}
	pre := []byte("{\"t\":\"hello\",\"dest\":\"a b\\\"c\"}\n{\"t\":\"list\"}\n")
	cmd := exec.Command("ssh", "host")
	cmd.Env = []string{"HOME=/h", EnvPreface + "=stale"}
	opts := withEnvPreface(cmd, pre)
	if !slices.Equal(opts, []string{"-o", "SendEnv=" + EnvPreface}) {
		t.Errorf("options %q", opts)
	}
	v := vars(cmd)
	if len(v) != 1 {
		t.Fatalf("the environment has %d %s", len(v), EnvPreface)
	}
	if got, err := DecodeEnvPreface(v[0]); err != nil || !bytes.Equal(got, pre) {
		t.Errorf("decoded %q, %v", got, err)
	}
	if !slices.Contains(cmd.Env, "HOME=/h") {
		t.Errorf("the rest of the environment went: %q", cmd.Env)
	}

	long := bytes.Repeat([]byte("{\"t\":\"list\"}\n"), MaxEnvPreface)
	cmd = exec.Command("ssh", "host")
	cmd.Env = []string{EnvPreface + "=stale"}
	if opts := withEnvPreface(cmd, long); !slices.Equal(opts, []string{"-o", "SendEnv=" + EnvPreface}) || len(vars(cmd)) != 0 {
		t.Errorf("a long preface: options %q, variables %q", opts, vars(cmd))
	}

	for _, bad := range []string{"", "!!!!", strings.Repeat("A", MaxEnvPreface+4), "e3RydWV9" /* "{true}" without its newline */} {
		if b, err := DecodeEnvPreface(bad); err == nil {
			t.Errorf("decoded %q from %q", b, bad)
		}
	}
}
