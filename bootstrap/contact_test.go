package bootstrap

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// reasons are the reasons of p's first contact's attempts, in order (0: the first).
func reasons(p *Peer) []reason {
	var rs []reason
	for _, a := range p.attempts {
		rs = append(rs, a.after)
	}
	return rs
}

// fakeMuxSSH stands before fakeSSH (FAKE_SSH) as an ssh whose configuration shares nothing for
// the host (-G says nothing), whose shared connection's master answers `ssh -O check` as pid
// FAKE_MASTER_PID and `-O exit`, and whose first session (the one that makes the directory
// FAKE_DEAD) never answers, as over a connection a network change left dead. It logs "shared"
// for each session with the sharing options.
const fakeMuxSSH = `#!/bin/sh
case " $* " in
*" -G "*) exit 0;;
*" -O check "*) echo "Master running (pid=$FAKE_MASTER_PID)"; exit 0;;
*" -O exit "*) echo "Exit request sent."; exit 0;;
esac
case " $* " in *" ControlMaster=auto "*) echo shared >>"$FAKE_SSH_LOG";; esac
if mkdir "$FAKE_DEAD" 2>/dev/null; then exec sleep 60; fi
exec "$FAKE_SSH" "$@"
`

// TestStartSilentSharedConnection: where the shared connection's master answers but its session
// does not within muxAnswer, first contact says so, ends the master and makes a second attempt
// over a new connection (the sharing options still given: ssh makes a new master), which carries
// on with the first attempt's plan (Took counts from it) and installs the peer. The attempts say
// why the second was made.
func TestStartSilentSharedConnection(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	dir, ssh, log := fakeRemote(t)
	cache, err := os.MkdirTemp("", "fwa") // short: the control directory holds at most 40 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(cache)
	t.Setenv("XDG_CACHE_HOME", cache)
	mux := filepath.Join(dir, "mux-ssh")
	if err := os.WriteFile(mux, []byte(fakeMuxSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_SSH", ssh)
	t.Setenv("FAKE_MASTER_PID", "2147480000") // no such process: nothing is signalled
	t.Setenv("FAKE_DEAD", filepath.Join(t.TempDir(), "dead"))
	t.Setenv("FAKE_HOME", t.TempDir())
	t.Setenv("FAKE_PATH", all)
	_, id := fakePeer(t, dir, 64<<10)
	pre := []byte("{\"type\":\"hello\"}\n")
	var notices []string
	s := SSH{SSHPath: mux, Persist: time.Minute, Notice: func(l string) { notices = append(notices, l) }}
	p, err := Start(context.Background(), s, "h", id, []string{"--pub", "k"}, pre)
	if err != nil {
		t.Fatalf("start: %v; notices %q", err, notices)
	}
	defer p.Close(time.Second)
	want := "served serve --pub k umask=0027\n" + string(pre)
	if got := make([]byte, len(want)); func() bool { _, err := io.ReadFull(p.Stdout, got); return err != nil || string(got) != want }() {
		t.Fatalf("control channel: got %q, want %q", got, want)
	}
	said := "the shared ssh connection to h did not answer within 5s; closing it and connecting again"
	if !p.Uploaded || !slices.Contains(notices, said) {
		t.Fatalf("uploaded %v, notices %q", p.Uploaded, notices)
	}
	if got := reasons(p); !slices.Equal(got, []reason{0, muxSilent}) {
		t.Fatalf("attempts %v, want the first and one after muxSilent", got)
	}
	first, second := p.attempts[0], p.attempts[1]
	if !first.muxed || second.muxed || second.ahead || second.why != said {
		t.Errorf("attempts %+v", p.attempts)
	}
	if p.Took < muxAnswer {
		t.Errorf("Took %s: not counted from the first attempt", p.Took)
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "shared\n") != 2 || strings.Count(string(b), "session\n") != 1 {
		t.Errorf("sessions log %q: want two sessions with the sharing options, the second reaching the remote", b)
	}
}
