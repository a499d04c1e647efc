//go:build linux

// Package labcli implements `farwing lab`: start an emulated WAN and an sshd
// behind it, run a command on the near side, report, tear down.
package labcli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/sshlab"
	"github.com/farwing/farwing/internal/units"
)

const usage = `usage: farwing lab [flags] [-- COMMAND [ARGS...]]

Starts two network namespaces joined by an emulated link (rate, delay and
random loss per direction, drop-tail queue) and an sshd for a throwaway user
on the far side (B), then runs COMMAND on the near side (A) with
  FARWING_LAB_SSH_CONFIG  ssh_config defining the far host (ssh -F)
  FARWING_LAB_HOST        its host alias
  FARWING_LAB_HOME        the remote user's (writable) home directory
  FARWING_LAB_USER        the remote user
  FARWING_LAB_ADDR_A/_B   the two ends' addresses
  FARWING_LAB_NS_A/_B     the namespaces (ip netns exec $FARWING_LAB_NS_B ...)
Without COMMAND it runs an interactive $SHELL in A. Exits with COMMAND's
status. Needs root.

Example:
  farwing lab --rate 400M --rtt 140ms --loss 0.5% -- \
    sh -c 'scp -F "$FARWING_LAB_SSH_CONFIG" big.file "$FARWING_LAB_HOST":'

--veth joins the namespaces with a veth pair (MTU 1500) instead of the
emulator: the kernel's own path, for rates the emulator cannot carry (it
saturates at 2-3 Gbit/s). Same addresses, sshd and variables. Unlimited
unless --rate is given; --rate shapes each direction's egress with an HTB
class at that rate, in IP bytes like the emulator's, and --queue BYTES puts a
bfifo of that size under it. This kernel has no netem: --rtt, --loss, a queue
in BDPs and --cpuprofile (there is no emulator) are refused with --veth.
  farwing lab --veth -- farwing copy --sink big "$FARWING_LAB_HOST":x ...

--at WHEN:KEY=VALUE[,KEY=VALUE...] changes the path WHEN (a duration) after
COMMAND starts; keys rate, rtt, loss, queue as the flags, and dir=both|ab|ba
(default both). Without queue= the queue keeps its size in bytes. Each change
is logged on stderr with its unix time ("lab: at +8.000s (unix T): ...").
  farwing lab --rate 400M --rtt 140ms --at 8s:rate=200M --at 20s:rate=400M -- ...

flags:
`

// Options are what the lab subcommand takes from the process that runs it: its caller
// (cmd/farwing) reads them there, once.
type Options struct {
	Stdin          io.Reader // COMMAND's standard input (nil: nothing, /dev/null)
	Stdout, Stderr io.Writer
	// Shell is what runs in namespace A without a COMMAND (cmd/farwing: $SHELL; "": /bin/sh).
	Shell string
}

// Main runs the lab subcommand; args exclude the subcommand name.
func Main(args []string, o Options) int {
	stdout, stderr := o.Stdout, o.Stderr
	fs := pflag.NewFlagSet("lab", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SetInterspersed(false)
	rateS := fs.String("rate", "100M", "bottleneck rate each way in bits/s of IP bytes (K/M/G suffixes; 0 = unlimited)")
	rtt := fs.Duration("rtt", 60*time.Millisecond, "round-trip propagation delay (rtt/2 each way)")
	lossS := fs.String("loss", "0", `random loss each way, "1%" or "0.01"`)
	queueS := fs.String("queue", "1bdp", `drop-tail queue: bytes (K/M/G = KiB/MiB/GiB) or "Nbdp" of rate×rtt`)
	seed := fs.Int64("seed", 1, "seed of the loss processes")
	noSSH := fs.Bool("no-ssh", false, "do not start sshd (pure network experiments)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the emulator to this file")
	atS := fs.StringArray("at", nil, `change the path while COMMAND runs: "8s:rate=200M[,rtt=..,loss=..,queue=..,dir=ab|ba|both]" (repeatable)`)
	veth := fs.Bool("veth", false, "a veth pair instead of the emulator: the kernel's path, unlimited or --rate through HTB; no --rtt or --loss")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	rate, err := units.ParseLinkRate(*rateS)
	if err == nil && *rtt < 0 {
		err = fmt.Errorf("negative --rtt %v", *rtt)
	}
	var loss float64
	if err == nil {
		loss, err = units.ParseLoss(*lossS)
	}
	var queue int
	if err == nil {
		queue, err = ParseQueue(*queueS, rate, *rtt)
	}
	var changes []Change
	for _, a := range *atS {
		if err != nil {
			break
		}
		var c Change
		c, err = ParseChange(a)
		changes = append(changes, c)
	}
	if err == nil && *veth {
		rate, queue, err = vethFlags(fs, rate, *rtt, loss, *queueS, changes)
		*rtt, loss = 0, 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "farwing lab: %v\n", err)
		return 2
	}

	// Catch signals before anything exists to tear down.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	cfg := lab.Symmetric(rate, *rtt, loss, queue, *seed)
	cfg.Veth = *veth
	l, err := lab.Start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "farwing lab: %v\n", err)
		return 1
	}
	defer func() {
		if err := l.Close(); err != nil {
			fmt.Fprintf(stderr, "farwing lab: teardown: %v\n", err)
		}
	}()
	env := append(os.Environ(),
		"FARWING_LAB=1",
		"FARWING_LAB_ADDR_A="+l.AddrA.String(),
		"FARWING_LAB_ADDR_B="+l.AddrB.String(),
		"FARWING_LAB_NS_A="+l.NSA,
		"FARWING_LAB_NS_B="+l.NSB,
	)
	if !*noSSH {
		srv, err := sshlab.Start(l)
		if err != nil {
			fmt.Fprintf(stderr, "farwing lab: %v\n", err)
			return 1
		}
		defer func() {
			if err := srv.Close(); err != nil {
				fmt.Fprintf(stderr, "farwing lab: teardown: %v\n", err)
			}
		}()
		env = append(env,
			"FARWING_LAB_SSH_CONFIG="+srv.ConfigFile,
			"FARWING_LAB_HOST="+srv.Host,
			"FARWING_LAB_HOME="+srv.Home,
			"FARWING_LAB_USER="+srv.User,
		)
	}
	p := l.Path(lab.AtoB)
	if l.Veth {
		fmt.Fprintf(stderr, "lab: A %s (%s) <-> B %s (%s): veth, no emulator, each way %s\n", l.AddrA, l.NSA, l.AddrB, l.NSB, vethShape(p))
	} else {
		fmt.Fprintf(stderr, "lab: A %s (%s) <-> B %s (%s): rate %s, rtt %v, loss %g%%, queue %d bytes, seed %d\n",
			l.AddrA, l.NSA, l.AddrB, l.NSB, FormatRate(rate), *rtt, loss*100, effectiveQueue(p), *seed)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "farwing lab: %v\n", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}

	command := fs.Args()
	if len(command) == 0 {
		shell := o.Shell
		if shell == "" {
			shell = "/bin/sh"
		}
		fmt.Fprintf(stderr, "lab: interactive %s in namespace A; try\n"+
			"  ssh -F \"$FARWING_LAB_SSH_CONFIG\" \"$FARWING_LAB_HOST\"\n"+
			"  ip netns exec \"$FARWING_LAB_NS_B\" iperf3 -s -D; iperf3 -c \"$FARWING_LAB_ADDR_B\"\n"+
			"exit the shell to tear the lab down.\n", shell)
		command = []string{shell}
	}
	// Scheduled changes log from another goroutine while COMMAND writes to
	// stderr: a writer that is not a file (tests) gets a lock.
	if _, ok := stderr.(*os.File); !ok && len(changes) > 0 {
		stderr = &lockedWriter{w: stderr}
	}
	cmd := l.Command(l.NSA, command[0], command[1:]...)
	cmd.Env = env
	cmd.Stdin = o.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// Report the command's traffic, not sshd's readiness probes.
	atob0, btoa0 := l.Stats()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "farwing lab: %v\n", err)
		return 1
	}
	stopChanges := schedule(l, changes, start, stderr)
	code := wait(cmd, sigs, stderr)
	elapsed := time.Since(start)
	stopChanges()

	atob, btoa := l.Stats()
	format := FormatStats
	if l.Veth {
		format = FormatVethStats
	}
	fmt.Fprintf(stderr, "lab: %v elapsed\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(stderr, "lab: A->B %s\n", format(atob.Sub(atob0), elapsed))
	fmt.Fprintf(stderr, "lab: B->A %s\n", format(btoa.Sub(btoa0), elapsed))
	if err := l.Err(); err != nil {
		fmt.Fprintf(stderr, "farwing lab: %v\n", err)
	}
	return code
}

// wait waits for cmd and returns its exit code. SIGINT is left to the child:
// the terminal delivers it to the whole foreground group, and an interactive
// shell must survive it. SIGTERM and SIGHUP are forwarded, with SIGKILL
// after a grace period.
func wait(cmd *exec.Cmd, sigs <-chan os.Signal, stderr io.Writer) int {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var kill <-chan time.Time
	for {
		select {
		case err := <-done:
			return exitCode(err, stderr)
		case sig := <-sigs:
			if sig == syscall.SIGINT {
				continue
			}
			cmd.Process.Signal(sig)
			if kill == nil {
				kill = time.After(5 * time.Second)
			}
		case <-kill:
			fmt.Fprintln(stderr, "lab: command ignored the signal; killing it")
			cmd.Process.Kill()
		}
	}
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "farwing lab: %v\n", err)
	return 1
}

// Change is one scheduled change of the path (--at).
type Change struct {
	At    time.Duration // after COMMAND starts
	Dirs  []lab.Direction
	Rate  *float64       // bits/s
	RTT   *time.Duration // round trip; each direction gets half
	Loss  *float64
	Queue string // as --queue, resolved against the new rate and rtt; "" keeps the byte size
}

// ParseChange parses "WHEN:KEY=VALUE[,KEY=VALUE...]", e.g. "8s:rate=200M"
// or "12.5s:loss=1%,dir=ab".
func ParseChange(s string) (Change, error) {
	bad := func(why string) (Change, error) {
		return Change{}, fmt.Errorf("bad --at %q: %s; want e.g. 8s:rate=200M,dir=both", s, why)
	}
	when, settings, ok := strings.Cut(s, ":")
	if !ok || settings == "" {
		return bad("no settings")
	}
	at, err := time.ParseDuration(strings.TrimSpace(when))
	if err != nil || at < 0 {
		return bad("time must be a duration like 8s")
	}
	c := Change{At: at, Dirs: []lab.Direction{lab.AtoB, lab.BtoA}}
	changed := false
	for kv := range strings.SplitSeq(settings, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || v == "" {
			return bad(fmt.Sprintf("%q is not KEY=VALUE", kv))
		}
		switch k {
		case "rate":
			r, err := units.ParseLinkRate(v)
			if err != nil {
				return bad(err.Error())
			}
			c.Rate, changed = &r, true
		case "rtt":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return bad("rtt must be a duration like 140ms")
			}
			c.RTT, changed = &d, true
		case "loss":
			p, err := units.ParseLoss(v)
			if err != nil {
				return bad(err.Error())
			}
			c.Loss, changed = &p, true
		case "queue":
			if _, err := ParseQueue(v, 1e6, time.Second); err != nil {
				return bad(err.Error())
			}
			c.Queue, changed = v, true
		case "dir":
			switch strings.ToLower(v) {
			case "both":
				c.Dirs = []lab.Direction{lab.AtoB, lab.BtoA}
			case "ab", "a->b", "atob":
				c.Dirs = []lab.Direction{lab.AtoB}
			case "ba", "b->a", "btoa":
				c.Dirs = []lab.Direction{lab.BtoA}
			default:
				return bad("dir must be both, ab or ba")
			}
		default:
			return bad(fmt.Sprintf("unknown key %q (rate, rtt, loss, queue, dir)", k))
		}
	}
	if !changed {
		return bad("nothing to change")
	}
	return c, nil
}

// Apply returns p with the change made. Without Queue the queue keeps its
// current limit in bytes (a router's buffer does not shrink with the rate).
func (c Change) Apply(p lab.Path) lab.Path {
	if c.Queue == "" && p.QueueBytes <= 0 {
		p.QueueBytes = effectiveQueue(p)
	}
	if c.Rate != nil {
		p.RateBps = *c.Rate
	}
	if c.RTT != nil {
		p.Delay = *c.RTT / 2
	}
	if c.Loss != nil {
		p.Loss = *c.Loss
	}
	if c.Queue != "" {
		p.QueueBytes, _ = ParseQueue(c.Queue, p.RateBps, 2*p.Delay) // validated by ParseChange
	}
	return p
}

// schedule applies changes at their times after start, logging each to w,
// until the returned stop is called; stop returns once nothing runs.
func schedule(l *lab.Lab, changes []Change, start time.Time, w io.Writer) (stop func()) {
	if len(changes) == 0 {
		return func() {}
	}
	sorted := slices.Clone(changes)
	slices.SortStableFunc(sorted, func(a, b Change) int { return cmp.Compare(a.At, b.At) })
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		for _, c := range sorted {
			t.Reset(time.Until(start.Add(c.At)))
			select {
			case <-quit:
				return
			case <-t.C:
			}
			now := time.Now()
			for _, d := range c.Dirs {
				was := l.Path(d)
				p := c.Apply(was)
				if l.Veth {
					// No default queue to resolve: without queue= the class keeps its leaf.
					if c.Queue == "" {
						p.QueueBytes = was.QueueBytes
					}
					if err := l.Set(d, p); err != nil {
						fmt.Fprintf(w, "lab: at +%.3fs: %v: %v\n", now.Sub(start).Seconds(), d, err)
						continue
					}
					fmt.Fprintf(w, "lab: at +%.3fs (unix %d.%06d): %v %s\n",
						now.Sub(start).Seconds(), now.Unix(), now.Nanosecond()/1000, d, vethShape(p))
					continue
				}
				l.SetPath(d, p)
				fmt.Fprintf(w, "lab: at +%.3fs (unix %d.%06d): %v rate %s, rtt %v, loss %g%%, queue %d bytes\n",
					now.Sub(start).Seconds(), now.Unix(), now.Nanosecond()/1000, d, FormatRate(p.RateBps),
					2*p.Delay, p.Loss*100, effectiveQueue(p))
			}
		}
	}()
	return func() { close(quit); <-done }
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

func effectiveQueue(p lab.Path) int {
	if p.QueueBytes > 0 {
		return p.QueueBytes
	}
	return lab.DefaultQueueBytes(p.RateBps, p.Delay)
}

// FormatStats renders one direction's counters on one line.
func FormatStats(s lab.PathStats, elapsed time.Duration) string {
	avg := "0"
	if bps := float64(s.Bytes) * 8 / elapsed.Seconds(); bps > 0 {
		avg = FormatRate(bps)
	}
	out := fmt.Sprintf("delivered %d pkts %s (%sbit/s avg), random-loss drops %d, queue drops %d, max queue %d B",
		s.Packets, units.Size(int64(s.Bytes)), avg, s.LossDrops, s.QueueDrops, s.MaxQueueBytes)
	if s.IdleShortNs > 0 || s.IdleLongNs > 0 {
		out += fmt.Sprintf(", idle %.3f s in gaps under 2 ms, %.3f s in gaps of 2 ms to 1 s", float64(s.IdleShortNs)/1e9, float64(s.IdleLongNs)/1e9)
	}
	if s.OverflowDrops > 0 || s.WriteErrors > 0 {
		out += fmt.Sprintf(", EMULATOR overflow drops %d, write errors %d", s.OverflowDrops, s.WriteErrors)
	}
	return out
}

// vethFlags checks the flags against what the veth path can do and returns its rate and queue
// in bytes: no --rate is unlimited (not the emulator's default), --rtt, --loss, a queue in BDPs
// (no round trip to multiply), a queue without a rate and --cpuprofile (no emulator) are
// refused, as are --at changes of rtt or loss.
func vethFlags(fs *pflag.FlagSet, rate float64, rtt time.Duration, loss float64, queueS string, changes []Change) (float64, int, error) {
	refuse := func(what string) error {
		return fmt.Errorf("--veth has no %s: this kernel has no netem and the veth lab no emulator (--rate, --queue BYTES and --at rate=,queue= only)", what)
	}
	if !fs.Changed("rate") {
		rate = 0
	}
	switch {
	case fs.Changed("rtt") && rtt != 0:
		return 0, 0, refuse("--rtt (no delay)")
	case fs.Changed("loss") && loss != 0:
		return 0, 0, refuse("--loss (no random loss)")
	case fs.Changed("cpuprofile"):
		return 0, 0, refuse("--cpuprofile (no emulator to profile)")
	}
	queue := 0
	if fs.Changed("queue") {
		if strings.HasSuffix(strings.ToLower(strings.TrimSpace(queueS)), "bdp") {
			return 0, 0, refuse("queue in BDPs (no round trip): give bytes, as --queue 1M")
		}
		if rate == 0 {
			return 0, 0, errors.New("--veth --queue needs a --rate: an unlimited veth has no queue of its own")
		}
		queue, _ = ParseQueue(queueS, rate, 0) // checked with the other flags
	}
	for _, c := range changes {
		switch {
		case c.RTT != nil && *c.RTT != 0:
			return 0, 0, refuse("--at rtt= (no delay)")
		case c.Loss != nil && *c.Loss != 0:
			return 0, 0, refuse("--at loss= (no random loss)")
		case strings.HasSuffix(strings.ToLower(c.Queue), "bdp"):
			return 0, 0, refuse("--at queue= in BDPs (no round trip): give bytes")
		}
	}
	return rate, queue, nil
}

// vethShape describes one direction of a veth lab.
func vethShape(p lab.Path) string {
	if p.RateBps == 0 {
		return "unlimited (no qdisc)"
	}
	q := "HTB's default leaf (pfifo of 1000 frames)"
	if p.QueueBytes > 0 {
		q = fmt.Sprintf("bfifo of %d bytes", p.QueueBytes)
	}
	return fmt.Sprintf("rate %s in IP bytes (HTB, burst %d bytes), queue %s", FormatRate(p.RateBps), lab.HTBBurst(p.RateBps), q)
}

// FormatVethStats renders one direction's kernel counters of a veth lab on one line. A GSO or TSO
// super-packet crosses a veth as one frame, so frames are not datagrams.
func FormatVethStats(s lab.PathStats, elapsed time.Duration) string {
	avg := "0"
	if bps := float64(s.Bytes) * 8 / elapsed.Seconds(); bps > 0 {
		avg = FormatRate(bps)
	}
	return fmt.Sprintf("delivered %d frames (a GSO or TSO super-packet is one) %s of IP bytes (%sbit/s avg), qdisc drops %d, veth drops %d",
		s.Packets, units.Size(int64(s.Bytes)), avg, s.QueueDrops, s.KernelDrops)
}

// FormatRate renders bits/s with a decimal suffix (units.RateShort); 0 is "unlimited".
func FormatRate(bps float64) string {
	if bps == 0 {
		return "unlimited"
	}
	return units.RateShort(bps)
}

// ParseQueue parses a queue limit in bytes ("65536", "256K", "4M", binary
// suffixes) or in bandwidth-delay products of rate×rtt ("1bdp", "0.5bdp").
// It returns 0 for the lab default (1 BDP, at least 64 KiB).
func ParseQueue(s string, rateBps float64, rtt time.Duration) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	bad := fmt.Errorf("bad queue %q: want bytes like 256K or a multiple like 1bdp", s)
	if t == "" || t == "1bdp" {
		return 0, nil
	}
	if strings.HasSuffix(t, "bdp") {
		v, err := strconv.ParseFloat(strings.TrimSuffix(t, "bdp"), 64)
		if err != nil || v <= 0 {
			return 0, bad
		}
		// Below two full packets a queue cannot even absorb a pair.
		return max(int(v*rateBps*rtt.Seconds()/8), 3000), nil
	}
	v, err := units.ParseSize(strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b"))
	if err != nil || v <= 0 || v > 1<<40 {
		return 0, bad
	}
	return int(v), nil
}
