package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/doctorpeer"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/peers"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
)

// doctorOptions are farwing doctor's flags.
type doctorOptions struct {
	json, verbose bool
	ports         string // --port LO-HI: check the range a copy would use
	ssh           sshFlags
}

func (d *doctorOptions) register(fs *pflag.FlagSet) {
	fs.BoolVar(&d.json, "json", false, "print the findings and both ends' facts as one JSON object on stdout")
	fs.BoolVarP(&d.verbose, "verbose", "v", false, "show ssh's own messages and each step")
	fs.StringVar(&d.ports, "port", "", "the remote peer's UDP ports, LO-HI, as for farwing copy --port (default: any)")
	d.ssh.register(fs)
}

// Verdicts of a finding.
const (
	verdictOK   = "ok"
	verdictWarn = "warn"
	verdictFail = "fail"
)

// finding is one check of farwing doctor: its verdict, what was found and what to do.
type finding struct {
	Check   string `json:"check"`
	Verdict string `json:"verdict"` // ok, warn or fail
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
	code    int    // the exit status a failure gives
}

// doctorChecks are the checks of a doctor run, in the order they are printed.
var doctorChecks = []string{"ssh", "peer", "udp", "capacity", "mtu", "buffers-local", "buffers-remote", "tcp-cc", "cpu-local", "cpu-remote", "clock"}

func cmdDoctor(ctx context.Context, tun tuning.Settings, args []string) int {
	fs := pflag.NewFlagSet("doctor", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var d doctorOptions
	d.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  farwing doctor [flags] [user@]host\n\n"+
			"Checks the path to host as a copy would use it: ssh, the remote peer, UDP both ways with the\n"+
			"round trip and the capacity packet trains bear out, the MTU, socket buffers at both ends (with the\n"+
			"sysctl lines that fix them), TCP congestion control, CPU features and the clock offset.\n"+
			"Each finding says ok, warn or fail and what to do; the exit status is 0 unless one fails.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "farwing doctor: doctor needs one host, [user@]host; see 'farwing doctor --help'")
		return exitUsage
	}
	ports, err := session.ParsePortRange(d.ports)
	if err != nil {
		fmt.Fprintf(stderr, "farwing doctor: %s\n", oneLine(err))
		return exitUsage
	}
	host := fs.Arg(0)
	o := xfer.Options{SSH: d.ssh.ssh(d.verbose, tun), Ports: ports, Tuning: tun, DebugLog: debugLog}
	if d.verbose {
		o.Log = func(f string, a ...any) { fmt.Fprintf(stderr, "farwing: "+f+"\n", a...) }
		o.SSH.Notice = func(line string) { fmt.Fprintf(stderr, "farwing: %s\n", line) }
	}
	rep, err := doctorpeer.Measure(ctx, o, host)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "farwing doctor: interrupted")
		return exitInterrupted
	}
	fs2 := diagnose(rep, err)
	code := 0
	for _, f := range fs2 {
		if f.Verdict == verdictFail && code == 0 {
			code = f.code
		}
	}
	if d.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			Host     string             `json:"host"`
			OK       bool               `json:"ok"`
			ExitCode int                `json:"exit_code"`
			Findings []finding          `json:"findings"`
			Report   *doctorpeer.Report `json:"report"`
		}{escape.Text(host), code == 0, code, fs2, rep})
		return code
	}
	fmt.Fprintf(stdout, "farwing doctor %s\n", escape.Text(host))
	for _, f := range fs2 {
		fmt.Fprintf(stdout, "  %-4s  %-14s %s\n", f.Verdict, f.Check, f.Detail)
		if f.Fix != "" {
			fmt.Fprintf(stdout, "  %-4s  %-14s fix: %s\n", "", "", f.Fix)
		}
	}
	return code
}

// diagnose turns a doctor run into findings. err is Doctor's: the peer could not be started (or
// broke the protocol), and the checks that need it are not made.
func diagnose(rep *doctorpeer.Report, err error) []finding {
	if err != nil {
		code := exitCode(err)
		msg := oneLine(err)
		if code == exitSSH {
			return []finding{{Check: "ssh", Verdict: verdictFail, Detail: msg, code: code,
				Fix: "check that 'ssh " + escape.Text(rep.Host) + " true' works with the same -F/-i/-P/-o/-J flags: host name, port, key, known_hosts"}}
		}
		if code == exitUDP { // the peer could not bind its lanes in the --port range
			return []finding{sshFinding(rep), {Check: "udp", Verdict: verdictFail, Detail: msg, code: code,
				Fix: "give a range with at least 4 ports free on the remote host (and open it in its firewall), or leave --port out"}}
		}
		fix := ""
		switch code {
		case exitPlatform:
			fix = "use a release build of farwing (make dist, make build), which carries peers for " + strings.Join(peers.Supported, ", ")
		case exitInstall:
			fix = "make ~/.cache/farwing writable for the remote user (or set XDG_CACHE_HOME there)"
		}
		return []finding{sshFinding(rep), {Check: "peer", Verdict: verdictFail, Detail: msg, Fix: fix, code: code}}
	}
	bdp, bdpKnown := pathBDP(rep)
	return []finding{
		sshFinding(rep),
		peerFinding(rep),
		udpFinding(rep),
		capacityFinding(rep),
		mtuFinding(rep),
		buffersFinding("buffers-local", "here", rep.LocalLanes, rep.Local, bdp, bdpKnown),
		buffersFinding("buffers-remote", "on "+escape.Text(rep.Host), rep.RemoteLanes, rep.Remote, bdp, bdpKnown),
		tcpFinding(rep),
		cpuFinding("cpu-local", "here", rep.Local),
		cpuFinding("cpu-remote", "on "+escape.Text(rep.Host), rep.Remote),
		clockFinding(rep),
	}
}

// slowSSH is the start time beyond which ssh gets a warning (an upload aside).
const slowSSH = 5.0

func sshFinding(rep *doctorpeer.Report) finding {
	f := finding{Check: "ssh", Verdict: verdictOK, Detail: fmt.Sprintf("reached %s and started the remote peer in %.2f s", escape.Text(rep.Host), rep.SSHSeconds)}
	if rep.Uploaded {
		f.Detail += " (installing it first)"
	} else if rep.SSHSeconds > slowSSH {
		f.Verdict = verdictWarn
		f.Fix = "every copy pays this start: look at 'ssh -v' for the slow step (DNS: UseDNS no in sshd_config; GSSAPIAuthentication no), and keep --ssh-persist on (the default shares one connection for 60 s)"
	}
	return f
}

func peerFinding(rep *doctorpeer.Report) finding {
	r := rep.Remote
	how := "already installed"
	if rep.Uploaded {
		how = "installed now"
	}
	f := finding{Check: "peer", Verdict: verdictOK, Detail: fmt.Sprintf("farwing %s (build %s) %s at %s, on %s %s/%s",
		escape.Text(r.Farwing), short(escape.Text(r.SHA256)), how, escape.Text(rep.PeerPath), escape.Text(r.Hostname), escape.Text(r.OS), escape.Text(r.Arch))}
	// The build this farwing installs there: the one it carries for the remote's platform (a
	// release build), or itself.
	if want := bootstrap.PeerHash(r.OS+"/"+r.Arch, rep.Local.SHA256); want != "" && r.SHA256 != want {
		f.Verdict = verdictWarn
		f.Detail += fmt.Sprintf("; this end installs build %s there", short(want))
		f.Fix = "the remote cache holds another build than this one's: the next copy installs this one's"
	}
	return f
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12] + "…"
	}
	return sha
}

// portsText writes ports as "40000-40003" when consecutive, else comma separated.
func portsText(p []int) string {
	if len(p) == 0 {
		return "none"
	}
	consecutive := len(p) > 1
	for i := 1; i < len(p); i++ {
		consecutive = consecutive && p[i] == p[i-1]+1
	}
	if consecutive {
		return fmt.Sprintf("%d-%d", p[0], p[len(p)-1])
	}
	s := make([]string, len(p))
	for i, v := range p {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func udpFinding(rep *doctorpeer.Report) finding {
	if rep.UDPError == "" {
		return finding{Check: "udp", Verdict: verdictOK, Detail: fmt.Sprintf("all %d lanes answer both ways: %s ports %s (this end's %s), round trip %.1f ms",
			session.Lanes, escape.Text(rep.Addr), portsText(rep.Ports), portsText(rep.LocalPorts), rep.RTTSeconds*1e3)}
	}
	// The copy's message (rep.UDPError, in --json) names both possible causes; the peer's word on
	// what its lanes heard tells which it is.
	f := finding{Check: "udp", Verdict: verdictFail, code: exitUDP, Detail: fmt.Sprintf("no UDP reply from %s ports %s within %s (this end's ports %s)",
		escape.Text(rep.Addr), portsText(rep.Ports), session.HandshakeTimeout, portsText(rep.LocalPorts))}
	switch h := rep.RemoteHeard; {
	case h == 0:
		f.Detail += "; the remote heard none of this end's datagrams: UDP to its ports is blocked on the way there"
		f.Fix = fmt.Sprintf("open UDP ports %s on the remote host's firewall (and any on the way), or give the peer a range you can open: farwing copy --port LO-HI", portsText(rep.Ports))
	case h < session.Lanes:
		f.Detail += fmt.Sprintf("; the remote heard %d of the %d lanes", h, session.Lanes)
		f.Fix = fmt.Sprintf("open all of UDP ports %s on the remote host's firewall, or give the peer a range you can open: farwing copy --port LO-HI", portsText(rep.Ports))
	default:
		f.Detail += "; the remote heard every lane, but its answers did not come back"
		f.Fix = fmt.Sprintf("let UDP from the remote's ports %s back to this end's ports %s (a firewall here, or a NAT that drops the replies)", portsText(rep.Ports), portsText(rep.LocalPorts))
	}
	f.Detail += "; a copy goes over TCP streams instead, at TCP's speed (exit 6 with --udp-only)"
	return f
}

func capacityFinding(rep *doctorpeer.Report) finding {
	if rep.UDPError != "" {
		return finding{Check: "capacity", Verdict: verdictWarn, Detail: "not measured: no UDP path", Fix: "see udp"}
	}
	if rep.Up == nil || rep.Down == nil {
		return finding{Check: "capacity", Verdict: verdictWarn, Detail: "not measured: the probe was not made", Fix: "run doctor again"}
	}
	up, down := rep.Up, rep.Down
	f := finding{Check: "capacity", Verdict: verdictOK, Detail: fmt.Sprintf("%s to the host, %s from it; %d packet trains of %d datagrams each way, %d of %d and %d of %d datagrams lost",
		capacityText(up), capacityText(down), up.Trains, up.Len, up.Sent-up.Arrived, up.Sent, down.Sent-down.Arrived, down.Sent)}
	if up.Why != doctorpeer.CapAgreed || down.Why != doctorpeer.CapAgreed {
		f.Detail += fmt.Sprintf(" (a figure is named only where %d trains agree within ±10 %% and at most a tenth of the datagrams were lost)", doctorpeer.Quorum)
	}
	var fix []string
	for _, c := range []*doctorpeer.Capacity{up, down} {
		switch c.Why {
		case doctorpeer.CapLossy, doctorpeer.CapNone:
			fix = append(fix, "the trains lost more than 10 % of their datagrams: look for loss on the path (a copy still runs through it, its parity repairing it) and run doctor again")
		case doctorpeer.CapUntimed:
			fix = append(fix, "too few trains could be timed (each was read in a burst: a busy CPU at either end, a hop that forwards in bursts, or a path over several Gbit/s): run doctor again, or measure with a copy (its summary names what held the rate)")
		}
	}
	if len(fix) > 0 {
		f.Verdict = verdictWarn
		f.Fix = strings.Join(slices.Compact(fix), "; ")
	}
	return f
}

// capacityText is what one direction's probe says of the path's capacity: a figure only where
// its trains agree (doctorpeer.Judge), else what it knows.
func capacityText(c *doctorpeer.Capacity) string {
	lost := c.Sent - c.Arrived
	switch c.Why {
	case doctorpeer.CapAgreed:
		return fmt.Sprintf("about %s (%d of %d trains agree)", units.Rate(c.Bps), c.Agreed, c.Trains)
	case doctorpeer.CapDisagreed:
		hi := 0.0
		for _, r := range c.Readings {
			hi = max(hi, r)
		}
		// AtLeastBps is the lowest reading (doctorpeer.Judge).
		return fmt.Sprintf("at least %s (the trains disagreed: %s-%s, %d of %d within ±10 %% of their median)", units.Rate(c.AtLeastBps), units.Rate(c.AtLeastBps), units.Rate(hi), c.Agreed, c.Trains)
	case doctorpeer.CapLossy:
		return fmt.Sprintf("unknown (the trains lost %d of %d datagrams)", lost, c.Sent)
	case doctorpeer.CapUntimed:
		read := 0
		for _, r := range c.Readings {
			if r > 0 {
				read++
			}
		}
		if read > 0 {
			return fmt.Sprintf("unknown (only %d of %d trains could be timed; %d of %d datagrams arrived)", read, c.Trains, c.Arrived, c.Sent)
		}
		return fmt.Sprintf("unknown (no train could be timed; %d of %d datagrams arrived)", c.Arrived, c.Sent)
	}
	return fmt.Sprintf("unknown (none of %d datagrams arrived)", c.Sent)
}

// datagramIP is the IP size of Farwing's largest datagram on IPv4 or IPv6.
func datagramIP(v6 bool) int {
	if v6 {
		return wire.MaxDatagramV6 + lane.IPv6UDPHeaders
	}
	return wire.MaxDatagramV6 + lane.IPv4UDPHeaders
}

func mtuFinding(rep *doctorpeer.Report) finding {
	v6 := strings.Contains(rep.Addr, ":")
	need := datagramIP(v6)
	side := func(mtu int, ifc string) string {
		if mtu <= 0 {
			return "unknown"
		}
		return fmt.Sprintf("%d (%s)", mtu, escape.Text(ifc))
	}
	f := finding{Check: "mtu", Verdict: verdictOK, Detail: fmt.Sprintf("route MTU %s here, %s on the host; farwing's largest datagram is %d bytes",
		side(rep.Local.MTU, rep.Local.Interface), side(rep.Remote.MTU, rep.Remote.Interface), need)}
	for _, s := range []struct {
		mtu   int
		ifc   string
		where string
	}{{rep.Local.MTU, rep.Local.Interface, "here"}, {rep.Remote.MTU, rep.Remote.Interface, "on the host"}} {
		if s.mtu > 0 && s.mtu < need {
			f.Verdict = verdictWarn
			f.Fix = fmt.Sprintf("%s's MTU %d is below %d: farwing's datagrams fragment there or are dropped; raise it %s (ip link set dev %s mtu 1500) where the link allows",
				escape.Text(s.ifc), s.mtu, need, s.where, escape.Text(s.ifc))
			return f
		}
	}
	arrived := func(c *doctorpeer.Capacity) bool { return c != nil && c.Arrived > 0 }
	switch {
	case rep.UpOK && rep.DownOK || arrived(rep.Up) && arrived(rep.Down):
		f.Detail += fmt.Sprintf("; full-size datagrams (%d bytes of UDP data) crossed the path both ways in the packet trains", wire.MaxDatagramV6)
	case rep.Local.MTU <= 0 || rep.Remote.MTU <= 0:
		f.Verdict = verdictWarn
		f.Fix = "an end's route MTU is unknown and the packet trains did not confirm full-size datagrams: if copies stall at the start, a hop's MTU may be below " + fmt.Sprint(need)
	default:
		f.Detail += "; the packet trains did not confirm full-size datagrams on the way"
	}
	return f
}

// minLaneBuffer is the least socket buffer per lane that doctor finds enough, whatever the
// bandwidth-delay product: what a lane's receive buffer absorbs while its reader is descheduled
// for a few milliseconds at a Gbit/s.
const minLaneBuffer = 1 << 20

// pathBDP is the bandwidth-delay product of the path from the capacity the probe named (the
// larger of the two directions') and the handshake's round trip, in bytes; known false when
// neither direction's trains agreed on a figure or the round trip is missing.
func pathBDP(rep *doctorpeer.Report) (bdp int64, known bool) {
	bps := 0.0
	for _, c := range []*doctorpeer.Capacity{rep.Up, rep.Down} {
		if c != nil && c.Why == doctorpeer.CapAgreed {
			bps = max(bps, c.Bps)
		}
	}
	if bps <= 0 || rep.RTTSeconds <= 0 {
		return 0, false
	}
	return int64(bps * rep.RTTSeconds / 8), true
}

// laneNeed is the socket buffer a lane should have for a path of bdp bytes: its share of the
// bandwidth-delay product, at least minLaneBuffer, at most what farwing asks for
// (lane.DefaultBuffer); without a known BDP, what farwing asks for.
func laneNeed(bdp int64, known bool) int {
	if !known {
		return lane.DefaultBuffer
	}
	return int(min(max(bdp/session.Lanes, minLaneBuffer), lane.DefaultBuffer))
}

// sysctlFix is the command that lets every lane have farwing's full buffers, and what it leads to.
func sysctlFix(recv, send bool, where string) string {
	var set, conf []string
	if recv {
		set = append(set, fmt.Sprintf("net.core.rmem_max=%d", lane.DefaultBuffer))
	}
	if send {
		set = append(set, fmt.Sprintf("net.core.wmem_max=%d", lane.DefaultBuffer))
	}
	conf = set
	total := lane.DefaultBuffer * session.Lanes
	return fmt.Sprintf("%s, as root: sysctl -w %s (each lane then gets %s, %s for the four: enough for a BDP of %s, 1 Gbit/s at %.0f ms); to keep it: printf '%s\\n' > /etc/sysctl.d/90-farwing.conf",
		where, strings.Join(set, " "), units.Size(int64(lane.DefaultBuffer)), units.Size(int64(total)), units.Size(int64(total)),
		float64(total)*8/1e9*1e3, strings.Join(conf, "\\n"))
}

func buffersFinding(check, where string, l xfer.DoctorLanes, f hostinfo.Facts, bdp int64, known bool) finding {
	need := laneNeed(bdp, known)
	why := fmt.Sprintf("the path's BDP %s needs %s per lane", units.Size(bdp), units.Size(int64(need)))
	if !known {
		why = fmt.Sprintf("the path's BDP is unknown, so the goal is farwing's full %s per lane", units.Size(int64(need)))
	}
	if l.RecvBuf <= 0 || l.SendBuf <= 0 {
		return finding{Check: check, Verdict: verdictWarn, Detail: fmt.Sprintf("UDP socket buffers %s: the lanes could not tell what the kernel granted (rmem_max %d, wmem_max %d)", where, f.TCP.RmemMax, f.TCP.WmemMax),
			Fix: sysctlFix(int(f.TCP.RmemMax) < need, int(f.TCP.WmemMax) < need, "if they are below "+fmt.Sprint(need)+" "+where)}
	}
	fd := finding{Check: check, Verdict: verdictOK, Detail: fmt.Sprintf("UDP socket buffers %s: receive %s, send %s per lane (granted; farwing asks for %s, rmem_max %d, wmem_max %d); %s",
		where, units.Size(int64(l.RecvBuf)), units.Size(int64(l.SendBuf)), units.Size(int64(lane.DefaultBuffer)), f.TCP.RmemMax, f.TCP.WmemMax, why)}
	recvShort, sendShort := l.RecvBuf < need, l.SendBuf < need
	if recvShort || sendShort {
		fd.Verdict = verdictWarn
		fd.Fix = sysctlFix(recvShort, sendShort, where)
	}
	return fd
}

func tcpFinding(rep *doctorpeer.Report) finding {
	name := func(f hostinfo.Facts) string {
		if f.TCP.Default == "" {
			return "unknown"
		}
		return escape.Text(f.TCP.Default)
	}
	f := finding{Check: "tcp-cc", Verdict: verdictOK, Detail: fmt.Sprintf("default TCP congestion control: %s here, %s on the host (farwing's lanes are UDP with their own rate control; this is what scp, rsync and HTTP get)",
		name(rep.Local), name(rep.Remote))}
	var fix []string
	for _, s := range []struct {
		f     hostinfo.Facts
		where string
	}{{rep.Local, "here"}, {rep.Remote, "on the host"}} {
		switch {
		case s.f.TCP.Default == "":
			f.Verdict = verdictWarn
			fix = append(fix, "cannot read it "+s.where)
		case s.f.TCP.Default != "bbr":
			how := "sysctl -w net.ipv4.tcp_congestion_control=bbr"
			if !slices.Contains(s.f.TCP.Available, "bbr") {
				how = "modprobe tcp_bbr; " + how
			}
			fix = append(fix, "for TCP tools on long lossy paths "+s.where+", as root: "+how)
		}
	}
	f.Fix = strings.Join(fix, "; ")
	return f
}

// hasAESGCM reports whether flags (hostinfo.CPUFeatures) give AES-GCM in hardware on arch, and
// whether the AVX-512 sealing path runs.
func hasAESGCM(arch string, flags []string) (hw, vaes, known bool) {
	has := func(names ...string) bool {
		for _, n := range names {
			if !slices.Contains(flags, n) {
				return false
			}
		}
		return true
	}
	switch arch {
	case "amd64", "386":
		return has("aes", "pclmulqdq"), has("avx512f", "avx512bw", "avx512vl", "avx512vaes", "avx512vpclmulqdq", "aes", "bmi2"), true
	case "arm64":
		return has("aes", "pmull"), false, true
	}
	return false, false, false
}

func cpuFinding(check, where string, f hostinfo.Facts) finding {
	hw, vaes, known := hasAESGCM(f.Arch, f.CPUFlags)
	model := escape.Text(f.CPU)
	if model == "" {
		model = "CPU"
	}
	switch {
	case !known:
		return finding{Check: check, Verdict: verdictWarn, Detail: fmt.Sprintf("%s %s (%s): cannot tell its AES support", model, where, escape.Text(f.Arch)),
			Fix: "if copies are slow with a busy CPU at this end, its AES-GCM may run in software"}
	case !hw:
		return finding{Check: check, Verdict: verdictWarn, Detail: fmt.Sprintf("%s %s, %d cores: no AES instructions (flags: %s): every datagram is sealed in software, several times slower",
			model, where, f.Cores, escape.Text(strings.Join(f.CPUFlags, " "))),
			Fix: "use a CPU or VM type that exposes AES-NI (in a VM: pass the host CPU through, e.g. -cpu host)"}
	}
	d := fmt.Sprintf("%s %s, %d cores: AES-GCM in hardware", model, where, f.Cores)
	if vaes {
		d += ", with AVX-512 VAES (the 512-bit sealing path)"
	} else if f.Arch == "amd64" {
		d += "; no AVX-512 VAES (the AES-NI path)"
	}
	return finding{Check: check, Verdict: verdictOK, Detail: d}
}

// maxClockOffset is the clock offset beyond which doctor warns.
const maxClockOffset = 1.0

func clockFinding(rep *doctorpeer.Report) finding {
	off, unc := rep.ClockOffset, rep.ClockUncertainty
	dir := "ahead of"
	if off < 0 {
		dir = "behind"
	}
	f := finding{Check: "clock", Verdict: verdictOK, Detail: fmt.Sprintf("the host's clock is %.3f s %s this one's (± %.3f s)", math.Abs(off), dir, unc)}
	if math.Abs(off)-unc > maxClockOffset {
		f.Verdict = verdictWarn
		f.Fix = "farwing does not depend on it, but file times and logs of the two ends disagree: run NTP on both (chrony, or timedatectl set-ntp true)"
	}
	return f
}
