// Package labcli implements `farwing lab`: start an emulated WAN and an sshd
// behind it, run a command on the near side, report, tear down.
package labcli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/sshlab"
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

flags:
`

// Main runs the lab subcommand; args exclude the subcommand name.
func Main(args []string, stdout, stderr io.Writer) int {
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
	rate, err := ParseRate(*rateS)
	if err == nil && *rtt < 0 {
		err = fmt.Errorf("negative --rtt %v", *rtt)
	}
	var loss float64
	if err == nil {
		loss, err = ParseLoss(*lossS)
	}
	var queue int
	if err == nil {
		queue, err = ParseQueue(*queueS, rate, *rtt)
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
	fmt.Fprintf(stderr, "lab: A %s (%s) <-> B %s (%s): rate %s, rtt %v, loss %g%%, queue %d bytes, seed %d\n",
		l.AddrA, l.NSA, l.AddrB, l.NSB, FormatRate(rate), *rtt, loss*100, effectiveQueue(p), *seed)

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
		shell := os.Getenv("SHELL")
		if shell == "" {
			shell = "/bin/sh"
		}
		fmt.Fprintf(stderr, "lab: interactive %s in namespace A; try\n"+
			"  ssh -F \"$FARWING_LAB_SSH_CONFIG\" \"$FARWING_LAB_HOST\"\n"+
			"  ip netns exec \"$FARWING_LAB_NS_B\" iperf3 -s -D; iperf3 -c \"$FARWING_LAB_ADDR_B\"\n"+
			"exit the shell to tear the lab down.\n", shell)
		command = []string{shell}
	}
	cmd := l.Command(l.NSA, command[0], command[1:]...)
	cmd.Env = env
	cmd.Stdin = os.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// Report the command's traffic, not sshd's readiness probes.
	atob0, btoa0 := l.Stats()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "farwing lab: %v\n", err)
		return 1
	}
	code := wait(cmd, sigs, stderr)
	elapsed := time.Since(start)

	atob, btoa := l.Stats()
	fmt.Fprintf(stderr, "lab: %v elapsed\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(stderr, "lab: A->B %s\n", FormatStats(atob.Sub(atob0), elapsed))
	fmt.Fprintf(stderr, "lab: B->A %s\n", FormatStats(btoa.Sub(btoa0), elapsed))
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
		s.Packets, formatBytes(s.Bytes), avg, s.LossDrops, s.QueueDrops, s.MaxQueueBytes)
	if s.OverflowDrops > 0 || s.WriteErrors > 0 {
		out += fmt.Sprintf(", EMULATOR overflow drops %d, write errors %d", s.OverflowDrops, s.WriteErrors)
	}
	return out
}

func formatBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%d B", b)
	}
}

// FormatRate renders bits/s with a decimal suffix.
func FormatRate(bps float64) string {
	switch {
	case bps == 0:
		return "unlimited"
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'f', 2, 64) + "G"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'f', 1, 64) + "M"
	case bps >= 1e3:
		return strconv.FormatFloat(bps/1e3, 'f', 1, 64) + "K"
	}
	return strconv.FormatFloat(bps, 'f', 0, 64)
}

// ParseRate parses bits/s: "100M", "1.5G", "800k", "100Mbit", "100mbps";
// decimal suffixes. "0" and "unlimited" mean no limit.
func ParseRate(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "unlimited" || t == "inf" {
		return 0, nil
	}
	for _, suf := range []string{"bit/s", "bps", "bit", "b/s"} {
		if strings.HasSuffix(t, suf) {
			t = strings.TrimSuffix(t, suf)
			break
		}
	}
	mult := 1.0
	if t != "" {
		switch t[len(t)-1] {
		case 'k':
			mult = 1e3
		case 'm':
			mult = 1e6
		case 'g':
			mult = 1e9
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v != v {
		return 0, fmt.Errorf("bad rate %q: want bits/s like 100M or 1.5G", s)
	}
	return v * mult, nil
}

// ParseLoss parses "1%" or "0.01".
func ParseLoss(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSuffix(t, "%"), 0.01
	}
	v, err := strconv.ParseFloat(t, 64)
	v *= scale
	if err != nil || v < 0 || v > 1 || v != v {
		return 0, fmt.Errorf("bad loss %q: want a probability like 1%% or 0.01", s)
	}
	return v, nil
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
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := 1
	if t != "" {
		switch t[len(t)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*float64(mult) > 1<<40 {
		return 0, bad
	}
	return int(v * float64(mult)), nil
}
