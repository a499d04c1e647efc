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
		RTTSeconds: 0.1, UpBps: 100e6, UpOK: true, DownBps: 95e6, DownOK: true, ClockOffset: 0.01, ClockUncertainty: 0.05}
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
	r.UpOK, r.DownOK = false, false
	if _, ok := pathBDP(r); ok {
		t.Error("a BDP without a capacity estimate")
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

	// Capacity: a missing estimate warns.
	r = goodReport()
	r.DownOK = false
	if f := capacityFinding(r); f.Verdict != verdictWarn || !strings.Contains(f.Detail, "no estimate from it") || f.Fix == "" {
		t.Errorf("no down estimate: %+v", f)
	}

	r = goodReport()
	r.UpBps = 2.7e9
	if f := capacityFinding(r); f.Verdict != verdictWarn || !strings.Contains(f.Fix, "differ more than 4×") {
		t.Errorf("estimates 28× apart: %+v", f)
	}
	r.UpBps = 300e6
	if f := capacityFinding(r); f.Verdict != verdictOK {
		t.Errorf("estimates 3× apart: %+v", f)
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
