package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/doctorpeer"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
)

// goodReport is a doctor run on a healthy path: 100 Mbit/s, 100 ms, every check fine.
func goodReport() *doctorpeer.Report {
	f := hostinfo.Facts{Hostname: "h", OS: "linux", Arch: "amd64", CPU: "Some CPU", Cores: 8, MTU: 1500, Interface: "eth0", SHA256: strings.Repeat("a", 64),
		Farwing: "v1", CPUFlags: []string{"aes", "pclmulqdq", "avx2"},
		TCP: hostinfo.TCP{Default: "bbr", Available: []string{"reno", "cubic", "bbr"}, RmemMax: 8 << 20, WmemMax: 8 << 20}}
	return &doctorpeer.Report{Host: "u@h", SSHSeconds: 0.4, PeerPath: "/home/u/.cache/farwing/farwing-aaaa", Local: f, Remote: f,
		LocalLanes: xfer.DoctorLanes{RecvBuf: 8 << 20, SendBuf: 8 << 20}, RemoteLanes: xfer.DoctorLanes{RecvBuf: 8 << 20, SendBuf: 8 << 20},
		Addr: "203.0.113.7", Ports: []int{40000, 40001, 40002, 40003}, LocalPorts: []int{51000, 51001, 51002, 51003}, RemoteHeard: 4,
		RTTSeconds: 0.1, UpBps: 100e6, UpOK: true, DownBps: 95e6, DownOK: true, ClockOffset: 0.01, ClockUncertainty: 0.05,
		Up: probed(6*34, 100, 99, 101, 100, 98, 102), Down: probed(6*34, 95, 96, 94, 95, 95, 97)}
}

// probed is one direction's probe of six trains of 34 datagrams, arrived of them, judged from
// readings in Mbit/s.
func probed(arrived int, mbps ...float64) *doctorpeer.Capacity {
	c := doctorpeer.Capacity{Trains: len(mbps), Len: 34, Sent: len(mbps) * 34, Arrived: arrived}
	for _, r := range mbps {
		c.Readings = append(c.Readings, r*1e6)
	}
	c = doctorpeer.Judge(c)
	return &c
}

func byCheck(fs []finding) map[string]finding {
	m := map[string]finding{}
	for _, f := range fs {
		m[f.Check] = f
	}
	return m
}

// TestDiagnoseAll: a healthy path gives every check, in order, all ok, no fix; a failed start
// gives the failing step with its exit code.
func TestDiagnoseAll(t *testing.T) {
	fs := diagnose(goodReport(), nil)
	if len(fs) != len(doctorChecks) {
		t.Fatalf("%d findings, want %d", len(fs), len(doctorChecks))
	}
	for i, f := range fs {
		if f.Check != doctorChecks[i] || f.Verdict != verdictOK || f.Fix != "" && f.Check != "tcp-cc" || f.Detail == "" {
			t.Errorf("finding %d: %+v", i, f)
		}
	}
	fs = diagnose(&doctorpeer.Report{Host: "u@h"}, fmt.Errorf("%w: ssh: Could not resolve hostname h", bootstrap.ErrSSH))
	if len(fs) != 1 || fs[0].Check != "ssh" || fs[0].Verdict != verdictFail || fs[0].code != exitSSH || fs[0].Fix == "" {
		t.Fatalf("ssh failure: %+v", fs)
	}
	fs = diagnose(&doctorpeer.Report{Host: "u@h", SSHSeconds: 1}, fmt.Errorf("%w: remote is Plan9 mips", bootstrap.ErrPlatform))
	if len(fs) != 2 || fs[0].Verdict != verdictOK || fs[1].Check != "peer" || fs[1].Verdict != verdictFail || fs[1].code != exitPlatform {
		t.Fatalf("platform failure: %+v", fs)
	}
	fs = diagnose(&doctorpeer.Report{Host: "u@h", SSHSeconds: 1}, &xfer.RemoteError{Msg: "the remote peer could bind only 2 of its 4 UDP lanes in ports 40000-40003", Code: xfer.CodeUDP})
	if len(fs) != 2 || fs[1].Check != "udp" || fs[1].Verdict != verdictFail || fs[1].code != exitUDP || !strings.Contains(fs[1].Detail, "only 2 of its 4") {
		t.Fatalf("no room in the port range: %+v", fs)
	}
}

// TestDoctorBuffers: buffers below what the BDP needs per lane warn with the sysctl line for
// the short one(s), naming the value (farwing's 8 MiB) and what it leads to.
func TestDoctorBuffers(t *testing.T) {
	const small = 212992 / 2 // Linux's default rmem_max, as a lane is granted it
	rmem := fmt.Sprintf("net.core.rmem_max=%d", lane.DefaultBuffer)
	wmem := fmt.Sprintf("net.core.wmem_max=%d", lane.DefaultBuffer)
	for _, c := range []struct {
		name       string
		recv, send int
		bdp        int64
		known      bool
		verdict    string
		want, not  []string
	}{
		{"enough", 8 << 20, 8 << 20, 25e6, true, verdictOK, nil, nil},
		{"small receive, small BDP", small, 8 << 20, 1.25e6, true, verdictWarn, []string{"sysctl -w " + rmem + " (", "each lane then gets 8.0 MiB, 32.0 MiB for the four", "/etc/sysctl.d/90-farwing.conf"}, []string{wmem}},
		{"small send", 8 << 20, small, 1.25e6, true, verdictWarn, []string{"sysctl -w " + wmem + " ("}, []string{rmem}},
		{"both small", small, small, 1.25e6, true, verdictWarn, []string{"sysctl -w " + rmem + " " + wmem + " ("}, nil},
		{"4 MiB for a 25 MB BDP", 4 << 20, 4 << 20, 25e6, true, verdictWarn, []string{rmem, wmem}, nil},
		{"4 MiB for a 10 MB BDP", 4 << 20, 4 << 20, 10e6, true, verdictOK, nil, nil},
		{"2 MiB, BDP unknown", 2 << 20, 2 << 20, 0, false, verdictWarn, []string{rmem}, nil},
		{"1 MiB for a tiny BDP", 1 << 20, 1 << 20, 10e3, true, verdictOK, nil, nil},
	} {
		f := buffersFinding("buffers-remote", "on h", xfer.DoctorLanes{RecvBuf: c.recv, SendBuf: c.send}, hostinfo.Facts{}, c.bdp, c.known)
		if f.Verdict != c.verdict {
			t.Errorf("%s: verdict %s, want %s (%s)", c.name, f.Verdict, c.verdict, f.Detail)
		}
		for _, w := range c.want {
			if !strings.Contains(f.Fix, w) {
				t.Errorf("%s: fix %q lacks %q", c.name, f.Fix, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(f.Fix, n) {
				t.Errorf("%s: fix %q names %q", c.name, f.Fix, n)
			}
		}
		if c.verdict == verdictOK && f.Fix != "" {
			t.Errorf("%s: ok with a fix %q", c.name, f.Fix)
		}
	}
	for _, c := range []struct {
		bdp   int64
		known bool
		want  int
	}{{0, false, lane.DefaultBuffer}, {1e3, true, 1 << 20}, {16e6, true, 4e6}, {1e9, true, lane.DefaultBuffer}} {
		if got := laneNeed(c.bdp, c.known); got != c.want {
			t.Errorf("laneNeed(%d, %v) = %d, want %d", c.bdp, c.known, got, c.want)
		}
	}
	if bdp, ok := pathBDP(goodReport()); !ok || bdp != 1250000 {
		t.Errorf("BDP of 100 Mbit/s × 100 ms: %d, %v", bdp, ok)
	}
	r := goodReport()
	r.Up, r.Down = probed(204, 50, 400, 120, 380, 90, 70), probed(150, 100, 100, 100, 100, 100, 100)
	if _, ok := pathBDP(r); ok {
		t.Error("a BDP without a capacity the trains agree on")
	}
	r.Down = probed(204, 400, 401, 399, 402, 398, 20)
	if bdp, ok := pathBDP(r); !ok || bdp != 5e6 {
		t.Errorf("BDP of 400 Mbit/s from one direction × 100 ms: %d, %v", bdp, ok)
	}
}

// TestDoctorVerdicts: the rules of the other checks, one case each way.
func TestDoctorVerdicts(t *testing.T) {
	// UDP: which way was blocked decides the advice; a failure exits 6.
	r := goodReport()
	r.UDPError, r.RemoteHeard, r.UpOK, r.DownOK = "no UDP reply from 203.0.113.7 port(s) 40000-40003 within 5s", 0, false, false
	f := udpFinding(r)
	if f.Verdict != verdictFail || f.code != exitUDP || !strings.Contains(f.Detail, "heard none") || !strings.Contains(f.Fix, "open UDP ports 40000-40003") ||
		!strings.HasPrefix(f.Detail, "no UDP reply from 203.0.113.7 ports 40000-40003 within 5s (this end's ports 51000-51003); ") {
		t.Errorf("UDP blocked: %+v", f)
	}
	r.RemoteHeard = 4
	if f := udpFinding(r); !strings.Contains(f.Detail, "answers did not come back") || !strings.Contains(f.Fix, "back to this end's ports 51000-51003") {
		t.Errorf("replies blocked: %+v", f)
	}
	r.RemoteHeard = 2
	if f := udpFinding(r); !strings.Contains(f.Detail, "heard 2 of the 4 lanes") {
		t.Errorf("two lanes heard: %+v", f)
	}
	if f := capacityFinding(r); f.Verdict != verdictWarn {
		t.Errorf("capacity without UDP: %+v", f)
	}
	if f := byCheck(diagnose(r, nil)); f["udp"].Verdict != verdictFail {
		t.Errorf("diagnose without UDP: %+v", f["udp"])
	}

	// Capacity: figures only where the trains agree; otherwise what the probe knows (TestCapacityLine).
	if f := capacityFinding(goodReport()); f.Verdict != verdictOK || !strings.Contains(f.Detail, "about 100.0 Mbit/s (6 of 6 trains agree) to the host, about 95.0 Mbit/s (6 of 6 trains agree) from it") {
		t.Errorf("agreeing trains: %+v", f)
	}

	// MTU: below farwing's 1480-byte datagrams (1500 on IPv6) warns naming the interface.
	r = goodReport()
	r.Remote.MTU, r.Remote.Interface = 1400, "wg0"
	if f := mtuFinding(r); f.Verdict != verdictWarn || !strings.Contains(f.Fix, "wg0's MTU 1400 is below 1480") || !strings.Contains(f.Fix, "ip link set dev wg0 mtu 1500") {
		t.Errorf("small MTU: %+v", f)
	}
	r = goodReport()
	r.Addr, r.Local.MTU = "2001:db8::7", 1492
	if f := mtuFinding(r); f.Verdict != verdictWarn || !strings.Contains(f.Fix, "below 1500") {
		t.Errorf("IPv6 at MTU 1492: %+v", f)
	}
	if f := mtuFinding(goodReport()); f.Verdict != verdictOK || !strings.Contains(f.Detail, "crossed the path both ways") {
		t.Errorf("MTU 1500: %+v", f)
	}

	// TCP congestion control: advice, not a warning, where bbr is not the default.
	r = goodReport()
	r.Remote.TCP.Default, r.Remote.TCP.Available = "cubic", []string{"reno", "cubic"}
	if f := tcpFinding(r); f.Verdict != verdictOK || !strings.Contains(f.Fix, "on the host, as root: modprobe tcp_bbr; sysctl -w net.ipv4.tcp_congestion_control=bbr") || strings.Contains(f.Fix, "here") {
		t.Errorf("cubic there: %+v", f)
	}
	r.Remote.TCP.Default = ""
	if f := tcpFinding(r); f.Verdict != verdictWarn {
		t.Errorf("unknown congestion control: %+v", f)
	}

	// CPU: no AES warns; VAES is named; arm64 needs aes and pmull; an unknown architecture warns.
	for _, c := range []struct {
		arch    string
		flags   []string
		verdict string
		want    string
	}{
		{"amd64", []string{"aes", "pclmulqdq"}, verdictOK, "no AVX-512 VAES"},
		{"amd64", []string{"aes", "pclmulqdq", "avx512f", "avx512bw", "avx512vl", "avx512vaes", "avx512vpclmulqdq", "bmi2"}, verdictOK, "with AVX-512 VAES"},
		{"amd64", []string{"avx2"}, verdictWarn, "no AES instructions"},
		{"arm64", []string{"aes", "pmull"}, verdictOK, "AES-GCM in hardware"},
		{"arm64", []string{"aes"}, verdictWarn, "no AES instructions"},
		{"riscv64", nil, verdictWarn, "cannot tell"},
	} {
		f := cpuFinding("cpu-remote", "on h", hostinfo.Facts{Arch: c.arch, CPUFlags: c.flags, CPU: "X", Cores: 2})
		if f.Verdict != c.verdict || !strings.Contains(f.Detail, c.want) || f.Verdict == verdictWarn && f.Fix == "" {
			t.Errorf("%s %v: %+v", c.arch, c.flags, f)
		}
	}

	// Clock: more than a second off, beyond the uncertainty, warns; the sign says which way.
	for _, c := range []struct {
		off, unc float64
		verdict  string
		want     string
	}{{0.2, 0.05, verdictOK, "0.200 s ahead of"}, {-3, 0.05, verdictWarn, "3.000 s behind"}, {1.05, 0.1, verdictOK, "ahead"}, {2.5, 0.1, verdictWarn, "ahead"}} {
		r := goodReport()
		r.ClockOffset, r.ClockUncertainty = c.off, c.unc
		if f := clockFinding(r); f.Verdict != c.verdict || !strings.Contains(f.Detail, c.want) {
			t.Errorf("offset %.2f ± %.2f: %+v", c.off, c.unc, f)
		}
	}

	// ssh: slow without an upload warns.
	r = goodReport()
	r.SSHSeconds = 8
	if f := sshFinding(r); f.Verdict != verdictWarn || f.Fix == "" {
		t.Errorf("slow ssh: %+v", f)
	}
	r.Uploaded = true
	if f := sshFinding(r); f.Verdict != verdictOK || !strings.Contains(f.Detail, "installing it first") {
		t.Errorf("slow ssh with an upload: %+v", f)
	}
}

// TestDoctorEscapes: remote text (CPU model, kernel facts, congestion control, paths) reaches the
// findings escaped.
func TestDoctorEscapes(t *testing.T) {
	r := goodReport()
	r.Remote.CPU, r.Remote.TCP.Default, r.Remote.Hostname, r.PeerPath = "\x1b]0;owned\x07CPU", "cu\x1b[2Jbic", "h\u202e", "/x\x1b[1m"
	r.Remote.Interface, r.Remote.MTU = "e\x1bth0", 1000
	r.UDPError = "no UDP reply \x1b[31m"
	for _, f := range diagnose(r, nil) {
		for _, s := range []string{f.Detail, f.Fix} {
			for _, c := range s {
				if c < 0x20 || c == 0x7f || c == '\u202e' {
					t.Errorf("%s: %q holds %U", f.Check, s, c)
				}
			}
		}
	}
}

// TestPeerFindingBuild: the peer check compares the remote's build with the one this farwing
// installs on that platform (itself, for a plain build on its own platform; a carried one for a
// release build), not with this executable: a release build's peers are other files.
func TestPeerFindingBuild(t *testing.T) {
	rep := goodReport()
	rep.Local.OS, rep.Local.Arch = runtime.GOOS, runtime.GOARCH
	rep.Remote.OS, rep.Remote.Arch = runtime.GOOS, runtime.GOARCH
	if f := peerFinding(rep); f.Verdict != verdictOK {
		t.Fatalf("the same build: %+v", f)
	}
	rep.Remote.SHA256 = strings.Repeat("b", 64)
	if f := peerFinding(rep); f.Verdict != verdictWarn || !strings.Contains(f.Detail, "this end installs build aaaaaaaaaaaa… there") {
		t.Fatalf("another build: %+v", f)
	}
	// A platform this (plain) build installs nothing on: no build to compare with.
	rep.Remote.OS, rep.Remote.Arch = "darwin", "arm64"
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		rep.Remote.OS, rep.Remote.Arch = "linux", "amd64"
	}
	if f := peerFinding(rep); f.Verdict != verdictOK {
		t.Fatalf("another platform: %+v", f)
	}
}

// TestCapacityLine: the capacity line names a figure only where a direction's trains agree, and
// otherwise says what it knows, one case per cause: disagreeing trains give "at least" the
// lowest reading (and no warning: nothing is wrong with the path), lossy ones and untimed ones
// say so with a warning and a fix. The lab's asymmetric "390.0 Mbit/s to the host, 166.7 Mbit/s
// from it" (issue 40), single trains read through a lossy path, gives no figure for either
// direction unless its own trains bear it out.
func TestCapacityLine(t *testing.T) {
	for _, c := range []struct {
		name     string
		up, down *doctorpeer.Capacity
		verdict  string
		want     []string
		not      []string
	}{
		{"disagreeing", probed(204, 47.6, 76.2, 191.2, 275.5, 390, 1010), probed(204, 400, 401, 399, 402, 398, 397), verdictOK,
			[]string{"at least 47.6 Mbit/s (the trains disagreed: 47.6 Mbit/s-1.01 Gbit/s, 1 of 6 within ±10 % of their median) to the host", "about 399.0 Mbit/s (6 of 6 trains agree) from it"}, []string{"about 47.6", "fix"}},
		{"lossy", probed(204, 400, 401, 399, 402, 398, 397), probed(180, 400, 401, 399, 402, 398, 397), verdictWarn,
			[]string{"unknown (the trains lost 24 of 204 datagrams) from it", "24 of 204 datagrams lost"}, []string{"from it; about"}},
		{"untimed", probed(204, 0, 0, 0, 0, 0, 0), probed(204, 100, 100, 100, 100, 100, 100), verdictWarn,
			[]string{"unknown (no train could be timed; 204 of 204 datagrams arrived) to the host"}, nil},
		{"one train read, compressed", probed(204, 0, 0, 0, 1163.5, 0, 0), probed(204, 100, 100, 100, 100, 100, 100), verdictWarn,
			[]string{"unknown (only 1 of 6 trains could be timed; 204 of 204 datagrams arrived) to the host"}, []string{"1.16 Gbit/s"}},
		{"none came", probed(204, 100, 100, 100, 100, 100, 100), probed(0, 0, 0, 0, 0, 0, 0), verdictWarn,
			[]string{"unknown (none of 204 datagrams arrived) from it"}, nil},
		{"390 and 166.7 from lossy trains", probed(190, 390, 392, 385, 0, 388, 391), probed(170, 166.7, 390, 0, 170, 0, 388), verdictWarn,
			[]string{"about 390.0 Mbit/s (5 of 6 trains agree) to the host", "unknown (the trains lost 34 of 204 datagrams) from it"}, []string{"166.7"}},
		{"390 and 166.7, little loss", probed(204, 390, 392, 385, 395, 388, 391), probed(200, 166.7, 390, 175, 170, 395, 388), verdictOK,
			[]string{"at least 166.7 Mbit/s (the trains disagreed"}, []string{"about 166.7", "166.7 Mbit/s from it"}},
	} {
		r := goodReport()
		r.Up, r.Down = c.up, c.down
		f := capacityFinding(r)
		t.Logf("%s: %s: %s; fix: %s", c.name, f.Verdict, f.Detail, f.Fix)
		if f.Verdict != c.verdict || (f.Verdict == verdictWarn) != (f.Fix != "") {
			t.Errorf("%s: verdict %s, fix %q", c.name, f.Verdict, f.Fix)
		}
		for _, w := range c.want {
			if !strings.Contains(f.Detail, w) {
				t.Errorf("%s: %q lacks %q", c.name, f.Detail, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(f.Detail, n) {
				t.Errorf("%s: %q says %q", c.name, f.Detail, n)
			}
		}
	}
}
