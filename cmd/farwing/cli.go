package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/cc"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/xfer"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

var stdout, stderr io.Writer = os.Stdout, os.Stderr

const usage = `farwing — fast file copy over long, lossy networks

Usage:
  farwing copy [flags] SRC... [user@]host:DST     push local files to a host
  farwing copy [flags] [user@]host:SRC... DST     pull files from a host
  farwing bench [user@]host [--size 5G]           compare with TCP, HTTP and scp (not yet)
  farwing lab [flags] -- COMMAND                  run COMMAND through an emulated WAN (root)
  farwing version
  farwing serve                                   the remote peer (started over ssh)

Run 'farwing copy --help' for the copy flags.

Exit status:
  0 success; 1 other failure; 2 bad command line; 3 source missing or unreadable;
  4 destination not writable; 5 ssh failed (host, connection, authentication);
  6 no UDP path or it died; 7 verification failed; 8 remote platform unsupported;
  9 the peer could not be installed on the remote host; 10 the other end broke the
  protocol (an unsafe or unrequested file name, a malformed message); 130 interrupted.
`

func run(args []string) int {
	xfer.Version = version
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return xfer.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "copy", "cp":
		defer session.StartProfile(os.Getenv(session.ProfileEnv), "client")()
		return cmdCopy(ctx, args[1:])
	case "serve":
		return cmdServe(ctx, args[1:])
	case "bench":
		fmt.Fprintln(stderr, "farwing bench: not yet implemented; see the issue tracker")
		return xfer.ExitFail
	case "lab":
		return cmdLab(ctx, args[1:])
	case "version", "--version":
		fmt.Fprintf(stdout, "farwing %s %s/%s %s\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "farwing: unknown command %q; run 'farwing help'\n", args[0])
	return xfer.ExitUsage
}

func cmdCopy(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("copy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        xfer.Options
		rate     = fs.String("rate", "", "rate ceiling in bits/s, counted in IP bytes (e.g. 300M, 1.5G); the exact rate with --policy fixed")
		minRate  = fs.String("min-rate", "", "rate floor in bits/s")
		policy   = fs.String("policy", "fair", "rate policy: fair (share with TCP), high (hold more under loss), fixed (hold --rate), low (yield to everything)")
		fecMode  = fs.String("fec", "auto", "Reed-Solomon parity: auto (sized from the measured random loss), off, or K+M (M parity datagrams per K data datagrams, e.g. 10+2)")
		window   = fs.Int("window", 0, "receive window in MiB (0: from rate and round trip)")
		jsonOut  = fs.Bool("json", false, "print one JSON summary object on stdout")
		verbose  = fs.BoolP("verbose", "v", false, "show progress details and ssh's own messages")
		quiet    = fs.BoolP("quiet", "q", false, "print nothing but errors")
		sshOpts  []string
		identity string
		config   string
		port     int
		jump     string
		persist  time.Duration
	)
	fs.BoolVarP(&o.Recursive, "recursive", "r", false, "copy directories recursively")
	fs.BoolVarP(&o.Preserve, "preserve", "p", false, "keep modification times")
	fs.BoolVar(&o.Sink, "sink", false, "receiving side verifies but discards the data (memory-to-memory measurement)")
	fs.StringVarP(&config, "ssh-config", "F", "", "ssh configuration file")
	fs.StringVarP(&identity, "identity", "i", "", "ssh identity (private key) file")
	fs.IntVarP(&port, "port", "P", 0, "ssh port")
	fs.StringArrayVarP(&sshOpts, "option", "o", nil, "ssh option, as in ssh -o (repeatable)")
	fs.StringVarP(&jump, "jump", "J", "", "ssh jump host (ProxyJump)")
	fs.DurationVar(&persist, "ssh-persist", 60*time.Second, "keep a shared ssh connection (ControlMaster) open this long after the copy, so the next copy to the host skips the ssh handshake; 0: off. Unused where your ssh config sets ControlMaster or ControlPath")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  farwing copy [flags] SRC... [user@]host:DST\n  farwing copy [flags] [user@]host:SRC... DST\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return xfer.ExitUsage
	}
	fail := func(code int, err error) int {
		// One line, and nothing in it that a terminal would act on: errors carry remote text.
		msg := escape.Text(strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintf(stderr, "farwing: %s\n", msg)
		if *jsonOut {
			json.NewEncoder(stdout).Encode(map[string]any{"error": msg, "exit_code": code})
		}
		return code
	}
	if *rate != "" {
		r, err := units.ParseRate(*rate)
		if err != nil {
			return fail(xfer.ExitUsage, err)
		}
		o.Rate = r
	}
	if *minRate != "" {
		r, err := units.ParseRate(*minRate)
		if err != nil {
			return fail(xfer.ExitUsage, err)
		}
		o.MinRate = r
	}
	fecm, err := fec.ParseMode(*fecMode)
	if err != nil {
		return fail(xfer.ExitUsage, err)
	}
	o.FEC = fecm
	pol, err := cc.ParsePolicy(*policy)
	if err != nil {
		return fail(xfer.ExitUsage, err)
	}
	if pol == cc.Fixed && o.Rate == 0 {
		return fail(xfer.ExitUsage, fmt.Errorf("--policy fixed needs --rate"))
	}
	if o.MinRate > 0 && o.Rate > 0 && o.MinRate > o.Rate {
		return fail(xfer.ExitUsage, fmt.Errorf("--min-rate is above --rate"))
	}
	o.Policy = pol
	if *window < 0 {
		return fail(xfer.ExitUsage, fmt.Errorf("--window must be positive"))
	}
	o.Window = *window
	o.SSH = bootstrap.SSH{Config: config, Identity: identity, Port: port, Options: sshOpts, Jump: jump, Persist: persist, Verbose: *verbose || os.Getenv("FARWING_DEBUG") != ""}
	if p := os.Getenv("FARWING_SSH"); p != "" {
		o.SSH.SSHPath = p
	}
	if p := os.Getenv("FARWING_SCP"); p != "" {
		o.SSH.SCPPath = p
	}
	if *verbose && !*quiet {
		t0 := time.Now()
		o.Log = func(f string, a ...any) {
			fmt.Fprintf(stderr, "farwing: [%5.2fs] "+f+"\n", append([]any{time.Since(t0).Seconds()}, a...)...)
		}
	}
	if !*quiet && (*verbose || isTerminal(os.Stderr)) {
		o.Progress = progressLine(*verbose && !isTerminal(os.Stderr))
	}
	pos := fs.Args()
	if len(pos) < 2 {
		return fail(xfer.ExitUsage, fmt.Errorf("copy needs a source and a destination, one of them host:path; see 'farwing copy --help'"))
	}
	srcs, dst := pos[:len(pos)-1], pos[len(pos)-1]
	dstHost, dstPath, dstRemote := splitRemote(dst)
	var res *xfer.Result
	switch {
	case dstRemote:
		for _, s := range srcs {
			if _, _, rem := splitRemote(s); rem {
				return fail(xfer.ExitUsage, fmt.Errorf("copying between two remote hosts is not supported: %s → %s", s, dst))
			}
		}
		res, err = xfer.Push(ctx, o, srcs, dstHost, dstPath)
	default:
		host := ""
		var paths []string
		for _, s := range srcs {
			h, p, rem := splitRemote(s)
			if !rem {
				return fail(xfer.ExitUsage, fmt.Errorf("neither %s nor %s is remote (host:path); use cp for local copies", s, dst))
			}
			if host != "" && h != host {
				return fail(xfer.ExitUsage, fmt.Errorf("all remote sources must be on one host (%s and %s)", host, h))
			}
			host = h
			paths = append(paths, p)
		}
		res, err = xfer.Pull(ctx, o, host, paths, dst)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fail(xfer.ExitInterrupted, fmt.Errorf("interrupted; partial files removed"))
		}
		return fail(xfer.ExitCode(err), err)
	}
	if !*quiet {
		summary(res)
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	}
	return 0
}

func summary(r *xfer.Result) {
	what := "copied"
	if r.Sink {
		what = "sent to sink"
	}
	digest := ""
	if len(r.BLAKE3) >= 16 {
		digest = ", BLAKE3 " + escape.Text(r.BLAKE3[:16]) + "…"
	}
	retx := ""
	if r.DatagramsSent > 0 && r.Retransmitted > 0 {
		retx = fmt.Sprintf(", %d datagrams re-sent", r.Retransmitted)
	}
	if r.RxDropped > 0 {
		retx += fmt.Sprintf(", %d receive-buffer overflows", r.RxDropped)
	}
	if r.ParitySent > 0 || r.FECRebuilt > 0 {
		retx += fmt.Sprintf(", %d parity, %d groups rebuilt by FEC", r.ParitySent, r.FECRebuilt)
	}
	fmt.Fprintf(stderr, "farwing: %s %d file(s), %s in %.2f s (data %.2f s, %s)%s%s, verified\n",
		what, len(r.Files), units.Size(r.Bytes), r.Seconds, r.DataSeconds, units.Rate(r.GoodputBps), retx, digest)
}

// splitRemote splits "[user@]host:path" the way scp does: a colon before any slash makes an
// argument remote; "[v6addr]:path" is accepted. An empty path means the remote home directory.
func splitRemote(arg string) (host, path string, remote bool) {
	at := ""
	rest := arg
	if i := strings.Index(arg, "@"); i > 0 && !strings.Contains(arg[:i], "/") && !strings.Contains(arg[:i], ":") {
		at, rest = arg[:i+1], arg[i+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if j := strings.Index(rest, "]:"); j > 0 {
			return at + rest[1:j], rest[j+2:], true
		}
		return "", arg, false
	}
	c := strings.Index(rest, ":")
	if c <= 0 {
		return "", arg, false
	}
	if s := strings.Index(rest, "/"); s >= 0 && s < c {
		return "", arg, false
	}
	return at + rest[:c], rest[c+1:], true
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLine prints "  41% 105.0 MiB/256.0 MiB  352.1 Mbit/s  rate 380.2 Mbit/s  srtt 141 ms (min 140)
// loss 1.02%  cong 0  re-sent 1234", redrawn in place on a terminal, one line per update otherwise.
func progressLine(lines bool) xfer.ProgressFunc {
	var last int64
	var lastT time.Duration
	return func(p session.Progress, total int64, el time.Duration, final bool) {
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(p.Bytes) / float64(total)
		}
		cur := 0.0
		if d := (el - lastT).Seconds(); d > 0 {
			cur = float64(p.Bytes-last) * 8 / d
		}
		if final && el > 0 { // the average: the last interval can be a few milliseconds
			cur = float64(p.Bytes) * 8 / el.Seconds()
		}
		last, lastT = p.Bytes, el
		s := fmt.Sprintf("%4.0f%% %s/%s  %s", pct, units.Size(p.Bytes), units.Size(total), units.Rate(cur))
		if p.RateBps > 0 {
			s += fmt.Sprintf("  rate %s  srtt %.0f ms (min %.0f)  loss %.2f%%  cong %d  re-sent %d  parity %d",
				units.Rate(p.RateBps), float64(p.SRTT)/1e6, float64(p.MinRTT)/1e6, 100*p.RandomLoss, p.CongestionEvents, p.Retransmitted, p.Parity)
			if p.Competing {
				s += "  competing"
			}
		}
		if p.Rebuilt > 0 {
			s += fmt.Sprintf("  fec-rebuilt %d", p.Rebuilt)
		}
		switch {
		case lines:
			fmt.Fprintln(stderr, s)
		case final:
			fmt.Fprintf(stderr, "\r\033[K")
		default:
			fmt.Fprintf(stderr, "\r\033[K%s", s)
		}
	}
}

// cmdServe is the remote peer, started over ssh by bootstrap: the control channel is stdin/stdout.
func cmdServe(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pub := fs.String("pub", "", "the client's ephemeral X25519 public key (set by farwing copy)")
	if err := fs.Parse(args); err != nil {
		return xfer.ExitUsage
	}
	if err := xfer.Serve(ctx, os.Stdin, os.Stdout, *pub, xfer.ServeOptions{SSHConnection: os.Getenv("SSH_CONNECTION")}); err != nil {
		fmt.Fprintf(stderr, "farwing serve: %v\n", err)
		return xfer.ExitCode(err)
	}
	return 0
}
