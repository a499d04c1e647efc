//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// doctorRun is one `farwing doctor` in namespace A against the lab's sshd.
func (e *labEnv) doctor(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	cmd := e.l.Command(e.l.NSA, e.bin, append([]string{"doctor", "-F", e.srv.ConfigFile}, append(args, e.srv.Host)...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run farwing doctor: %v", err)
	}
	return code, so.String(), se.String()
}

type doctorLanesJSON struct {
	Recv int `json:"recv_buffer"`
	Send int `json:"send_buffer"`
}

type doctorJSON struct {
	Host     string    `json:"host"`
	OK       bool      `json:"ok"`
	ExitCode int       `json:"exit_code"`
	Findings []finding `json:"findings"`
	Report   struct {
		Local, Remote struct {
			Hostname string   `json:"hostname"`
			Cores    int      `json:"cores"`
			Kernel   string   `json:"kernel"`
			SHA256   string   `json:"farwing_sha256"`
			MTU      int      `json:"mtu"`
			CPUFlags []string `json:"cpu_flags"`
			TCP      struct {
				Default string `json:"default_cc"`
				RmemMax int64  `json:"rmem_max"`
			} `json:"tcp"`
		}
		LocalLanes  doctorLanesJSON `json:"local_lanes"`
		RemoteLanes doctorLanesJSON `json:"remote_lanes"`
		RemotePorts []int           `json:"remote_ports"`
		UDPError    string          `json:"udp_error"`
		Heard       int             `json:"remote_lanes_heard"`
		RTT         float64         `json:"rtt_seconds"`
		UpBps       float64         `json:"train_up_bps"`
		UpOK        bool            `json:"train_up_ok"`
		DownBps     float64         `json:"train_down_bps"`
		DownOK      bool            `json:"train_down_ok"`
		Offset      float64         `json:"clock_offset_seconds"`
		Uncertainty float64         `json:"clock_uncertainty_seconds"`
	} `json:"report"`
}

// TestLabDoctor: farwing doctor against the lab's sshd (100 Mbit/s, 40 ms). The text output has
// every check once, in order, each ok, warn or fail; --json parses and holds both ends' facts,
// the measured round trip (at least the lab's 40 ms), packet-train estimates no faster than
// physics allows, a clock offset within its uncertainty (both ends share one clock), and the
// peer's lanes in a --port range. With UDP blocked the udp finding fails (exit 6) and says which
// way was blocked.
func TestLabDoctor(t *testing.T) {
	e := startLab(t, 100e6, 40*time.Millisecond, 0)

	code, out, errs := e.doctor()
	t.Logf("doctor:\n%s%s", out, errs)
	if code != 0 {
		t.Fatalf("exit %d on a working path", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var seen []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] != "fix:" && (f[0] == verdictOK || f[0] == verdictWarn || f[0] == verdictFail) {
			seen = append(seen, f[1])
			if f[0] == verdictFail {
				t.Errorf("a failure on a working path: %s", l)
			}
		}
	}
	if strings.Join(seen, " ") != strings.Join(doctorChecks, " ") {
		t.Fatalf("checks %q, want %q", seen, doctorChecks)
	}

	code, out, _ = e.doctor("--json", "--port", "45000-45003")
	var d doctorJSON
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if code != 0 || !d.OK || d.ExitCode != 0 || len(d.Findings) != len(doctorChecks) {
		t.Fatalf("exit %d, %+v", code, d)
	}
	for i, f := range d.Findings {
		if f.Check != doctorChecks[i] || f.Verdict != verdictOK && f.Verdict != verdictWarn || f.Detail == "" || f.Verdict == verdictWarn && f.Fix == "" {
			t.Errorf("finding %d: %+v", i, f)
		}
	}
	r := d.Report
	for _, end := range []struct {
		name string
		c    int
		k, h string
		sha  string
		mtu  int
		cc   string
	}{{"local", r.Local.Cores, r.Local.Kernel, r.Local.Hostname, r.Local.SHA256, r.Local.MTU, r.Local.TCP.Default},
		{"remote", r.Remote.Cores, r.Remote.Kernel, r.Remote.Hostname, r.Remote.SHA256, r.Remote.MTU, r.Remote.TCP.Default}} {
		if end.c <= 0 || end.k == "" || end.h == "" || len(end.sha) != 64 || end.mtu != 1500 || end.cc == "" {
			t.Errorf("%s facts incomplete: %+v", end.name, end)
		}
	}
	if r.Local.SHA256 != r.Remote.SHA256 {
		t.Errorf("the remote runs build %s, this end %s", r.Remote.SHA256, r.Local.SHA256)
	}
	if r.LocalLanes.Recv <= 0 || r.RemoteLanes.Recv <= 0 || r.LocalLanes.Send <= 0 || r.RemoteLanes.Send <= 0 {
		t.Errorf("lane buffers unknown: %+v %+v", r.LocalLanes, r.RemoteLanes)
	}
	if !slices.Equal(r.RemotePorts, []int{45000, 45001, 45002, 45003}) {
		t.Errorf("the peer's lanes on %v with --port 45000-45003", r.RemotePorts)
	}
	if r.UDPError != "" || r.Heard != 4 || r.RTT < 0.040 || r.RTT > 1 {
		t.Errorf("UDP: error %q, heard %d, round trip %.4f s on a 40 ms path", r.UDPError, r.Heard, r.RTT)
	}
	// An estimate may be missing (a warning) but, when there, is a rate. (No bound above: the
	// emulator on a loaded machine can release a train bunched, and it then looks faster than
	// the link.)
	if r.UpOK != (r.UpBps > 0) || r.DownOK != (r.DownBps > 0) {
		t.Errorf("train estimates %v/%v and %v/%v on a 100 Mbit/s path", r.UpBps, r.UpOK, r.DownBps, r.DownOK)
	}
	if r.Uncertainty <= 0 || math.Abs(r.Offset) > r.Uncertainty+0.005 {
		t.Errorf("clock offset %.4f ± %.4f s between two namespaces of one host", r.Offset, r.Uncertainty)
	}

	blocked := func(ab, ba bool) doctorJSON {
		defer dropUDP(e.l, ab, ba)()
		code, out, _ := e.doctor("--json")
		var d doctorJSON
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("--json printed %q: %v", out, err)
		}
		t.Logf("UDP blocked (A→B %v, B→A %v): %s: %s; fix: %s", ab, ba, d.Findings[2].Verdict, d.Findings[2].Detail, d.Findings[2].Fix)
		if code != 6 || d.OK || d.ExitCode != 6 || len(d.Findings) != len(doctorChecks) || d.Findings[2].Verdict != verdictFail ||
			!strings.Contains(d.Findings[2].Detail, "no UDP reply from") || d.Findings[2].Fix == "" {
			t.Fatalf("UDP blocked: exit %d, %+v", code, d.Findings)
		}
		return d
	}
	if d := blocked(true, true); d.Report.Heard != 0 || !strings.Contains(d.Findings[2].Detail, "heard none") {
		t.Errorf("UDP blocked both ways: heard %d, %q", d.Report.Heard, d.Findings[2].Detail)
	}
	if d := blocked(false, true); d.Report.Heard != 4 || !strings.Contains(d.Findings[2].Detail, "answers did not come back") {
		t.Errorf("UDP replies blocked: heard %d, %q", d.Report.Heard, d.Findings[2].Detail)
	}
}
