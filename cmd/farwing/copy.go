package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/xfer"
)

// copyOptions are farwing copy's flags.
type copyOptions struct {
	o                          xfer.Options
	rate, minRate, policy, fec string
	window                     int
	ports                      string // --port LO-HI: the remote peer's UDP ports
	limitKbit                  int64  // -l, scp's limit in Kbit/s
	json, verbose, quiet       bool
	checksum, ignoreTimes      bool
	ssh                        sshFlags
	filters                    []filterArg     // --exclude, --include, --exclude-from, --include-from, in order
	filesFrom                  string          // --files-from
	tun                        tuning.Settings // the environment's switches (run reads them)
}

func (c *copyOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.rate, "rate", "", "rate ceiling in bits/s, counted in IP bytes (e.g. 300M, 1.5G); the exact rate with --policy fixed")
	fs.Int64VarP(&c.limitKbit, "limit", "l", 0, "rate ceiling in Kbit/s, as scp's -l (the same as --rate with K)")
	fs.StringVar(&c.minRate, "min-rate", "", "rate floor in bits/s")
	fs.StringVar(&c.policy, "policy", "fair", "rate policy: fair (share with TCP), high (hold more under loss), fixed (hold --rate), low (yield to everything)")
	fs.StringVar(&c.fec, "fec", "auto", "Reed-Solomon parity: auto (sized from the measured random loss), off, or K+M (M parity datagrams per K data datagrams, e.g. 10+2)")
	fs.IntVar(&c.window, "window", 0, "receive window in MiB (0: from rate and round trip)")
	fs.IntVar(&c.o.MTU, "mtu", 0, "the path's MTU in bytes, where it is known to carry large datagrams (e.g. 9001 within an AWS region, 8500 over its inter-region VPC peering): from 8284 the copy proposes 8 KiB chunks, used only if every lane proves them each way in the handshake; 0: standard 1,406-byte chunks off loopback")
	fs.StringVar(&c.ports, "port", "", "the remote peer's UDP ports: it binds its four lanes inside LO-HI (e.g. 40000-40003, the ports to open in its firewall), and its TCP port where UDP is blocked; default: any")
	fs.BoolVar(&c.o.UDPOnly, "udp-only", false, "where no UDP gets through, fail (exit 6) instead of carrying the data over TCP streams")
	fs.BoolVar(&c.json, "json", false, "print events as JSON lines on stdout (start, progress, file, skip, send, delete, warning, error, summary; docs/EVENTS.md)")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "show progress details and ssh's own messages")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "print nothing but errors")
	fs.BoolVarP(&c.o.Recursive, "recursive", "r", false, "copy directories recursively")
	fs.BoolVarP(&c.o.Follow, "copy-links", "L", false, "follow symbolic links below a directory: copy what they point to (default: copy them as links)")
	fs.BoolVarP(&c.o.HardLinks, "hard-links", "H", false, "keep hard links: files with several names are sent once and linked at the destination")
	fs.BoolVarP(&c.o.Preserve, "preserve", "p", false, "keep modification times of files, directories and links")
	fs.BoolVar(&c.checksum, "checksum", false, "a destination file counts as already there (and is not sent) when its size and BLAKE3 digest are the source's, not its size and modification time")
	fs.BoolVar(&c.ignoreTimes, "ignore-times", false, "replace every file, even those the destination already has with the same size and modification time (compared block by block unless --whole-file)")
	fs.BoolVarP(&c.o.WholeFile, "whole-file", "W", false, "send changed files whole: do not compare a destination file of another size or time block by block with the source to send only the blocks that differ")
	fs.BoolVar(&c.o.NoResume, "no-resume", false, "start over: do not resume files an interrupted copy left at the destination (and remove them), and leave none if this copy is interrupted")
	c.registerFilters(fs)
	fs.BoolVarP(&c.o.DryRun, "dry-run", "n", false, "connect and list what the copy would send (and, with --delete, delete) on standard output, without doing either")
	fs.BoolVar(&c.o.Delete, "delete", false, "with -r: once every file is verified and in place, delete what the destination's directories of the copy hold and the source does not (what --exclude leaves out is kept)")
	fs.BoolVar(&c.o.Sink, "sink", false, "receiving side verifies but discards the data (memory-to-memory measurement)")
	c.ssh.register(fs)
}

// options checks the flags and returns the transfer's options (no log or progress functions).
func (c *copyOptions) options() (xfer.Options, error) {
	o := c.o
	var err error
	if c.rate != "" {
		if o.Rate, err = units.ParseRate(c.rate); err != nil {
			return o, err
		}
	}
	switch {
	case c.limitKbit < 0:
		return o, fmt.Errorf("-l %d: the limit is in Kbit/s and must be positive", c.limitKbit)
	case c.limitKbit > 0 && c.rate != "":
		return o, fmt.Errorf("-l and --rate both set the rate ceiling; give one")
	case c.limitKbit > 0:
		o.Rate = float64(c.limitKbit) * 1e3
	}
	if c.minRate != "" {
		if o.MinRate, err = units.ParseRate(c.minRate); err != nil {
			return o, err
		}
	}
	if o.FEC, err = fec.ParseMode(c.fec); err != nil {
		return o, err
	}
	if o.Policy, err = cc.ParsePolicy(c.policy); err != nil {
		return o, err
	}
	if o.Policy == cc.Fixed && o.Rate == 0 {
		return o, fmt.Errorf("--policy fixed needs --rate")
	}
	if o.MinRate > 0 && o.Rate > 0 && o.MinRate > o.Rate {
		return o, fmt.Errorf("--min-rate is above --rate")
	}
	switch {
	case c.checksum && c.ignoreTimes:
		return o, fmt.Errorf("--checksum and --ignore-times exclude each other")
	case c.checksum:
		o.Compare = fcopy.Checksum
	case c.ignoreTimes:
		o.Compare = fcopy.IgnoreTimes
	}
	if c.window < 0 {
		return o, fmt.Errorf("--window must be positive")
	}
	o.Window = c.window
	if o.MTU < 0 || o.MTU > 65535 {
		return o, fmt.Errorf("--mtu must be 0 to 65535")
	}
	if o.Ports, err = session.ParsePortRange(c.ports); err != nil {
		return o, err
	}
	o.SSH = c.ssh.ssh(c.verbose, c.tun)
	o.Tuning, o.DebugLog = c.tun, debugLog
	if !c.tun.NoPathMem {
		o.PathMemory = pathMemory()
	}
	return o, nil
}

// cmdCopy is `farwing copy`; stdin is what `-` as the source reads.
func cmdCopy(ctx context.Context, tun tuning.Settings, stdin io.Reader, args []string) int {
	fs := pflag.NewFlagSet("copy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	c := copyOptions{tun: tun}
	c.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  farwing copy [flags] SRC... [user@]host:DST\n  farwing copy [flags] [user@]host:SRC... DST\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	var ev *events
	if c.json {
		ev = newEvents(stdout)
	}
	fail := func(code int, err error) int {
		msg := oneLine(err)
		fmt.Fprintf(stderr, "farwing: %s\n", msg)
		if ev != nil {
			ev.fail(msg, code)
		}
		return code
	}
	o, err := c.options()
	if err != nil {
		return fail(exitUsage, err)
	}
	if c.verbose && !c.quiet {
		t0 := time.Now()
		o.Log = func(f string, a ...any) {
			fmt.Fprintf(stderr, "farwing: [%5.2fs] "+f+"\n", append([]any{time.Since(t0).Seconds()}, a...)...)
		}
		o.SSH.Log = o.Log
	}
	if !c.quiet {
		o.Warn = func(msg string) { fmt.Fprintf(stderr, "farwing: warning: %s\n", msg) }
	}
	if !c.quiet && (c.verbose || isTerminal(os.Stderr)) {
		o.Progress = progressLine(stderr, termWidth, c.verbose && !isTerminal(os.Stderr), c.verbose)
		o.SSH.Notice = func(line string) { fmt.Fprintf(stderr, "farwing: %s\n", line) }
	}
	if !c.quiet && isTerminal(os.Stderr) {
		o.SSH.Uploading = uploadLine
	}
	if ev != nil {
		ev.hook(&o)
	} else {
		listChanges(&o, c.verbose)
	}
	pos := fs.Args()
	if len(pos) < 2 {
		return fail(exitUsage, fmt.Errorf("copy needs a source and a destination, one of them host:path; see 'farwing copy --help'"))
	}
	srcs, dst := pos[:len(pos)-1], pos[len(pos)-1]
	var co fcopy.CollectOptions
	if err := c.filterOptions(&co, stdin, slices.Contains(srcs, "-")); err != nil {
		return fail(exitUsage, err)
	}
	o.Filter, o.FilesFrom = co.Filter, co.FilesFrom
	if err := o.CheckFlags(nil); err != nil {
		return fail(exitUsage, err)
	}
	dstHost, dstPath, dstRemote := splitRemote(dst)
	for _, s := range srcs {
		if s == "-" && len(srcs) > 1 {
			return fail(exitUsage, fmt.Errorf("- (standard input) must be the only source"))
		}
	}
	switch {
	case dst == "-" && c.json:
		return fail(exitUsage, fmt.Errorf("--json and - as the destination both write to standard output; give one"))
	case dst == "-" && o.DryRun:
		return fail(exitUsage, fmt.Errorf("--dry-run lists on standard output, and - as the destination writes it; give one"))
	case dst == "-" && o.Sink:
		return fail(exitUsage, fmt.Errorf("--sink writes nothing, and - as the destination writes standard output; give one"))
	}
	var res *xfer.Result
	switch {
	case dstRemote:
		for _, s := range srcs {
			if _, _, rem := splitRemote(s); rem {
				return fail(exitUsage, fmt.Errorf("copying between two remote hosts is not supported: %s → %s", s, dst))
			}
		}
		if ev != nil {
			ev.begin("push", dstHost, srcs, dstPath)
		}
		send := srcs
		if srcs[0] == "-" {
			p, done, err := spoolStdin(stdin)
			if err != nil {
				return fail(exitCode(err), err)
			}
			defer done()
			send = []string{p}
		}
		res, err = xfer.Push(ctx, o, send, dstHost, dstPath)
	default:
		host := ""
		var paths []string
		for _, s := range srcs {
			h, p, rem := splitRemote(s)
			if !rem {
				return fail(exitUsage, fmt.Errorf("neither %s nor %s is remote (host:path); use cp for local copies", s, dst))
			}
			if host != "" && h != host {
				return fail(exitUsage, fmt.Errorf("all remote sources must be on one host (%s and %s)", host, h))
			}
			host = h
			paths = append(paths, p)
		}
		if err := o.CheckFlags(paths); err != nil {
			return fail(exitUsage, err)
		}
		if ev != nil {
			ev.begin("pull", host, paths, dst)
		}
		if dst == "-" {
			res, err = pullToStdout(ctx, o, host, paths)
			break
		}
		res, err = xfer.Pull(ctx, o, host, paths, dst)
	}
	if err != nil {
		if ctx.Err() != nil {
			if o.NoResume {
				return fail(exitInterrupted, fmt.Errorf("interrupted; partial files removed (--no-resume)"))
			}
			return fail(exitInterrupted, fmt.Errorf("interrupted; partial files with a resume record are kept, and the same command resumes them"))
		}
		return fail(exitCode(err), err)
	}
	if !c.quiet && res.DryRun {
		fmt.Fprintf(stderr, "farwing: dry run: would send %d file(s), %s; would delete %s; nothing was sent or deleted\n",
			res.WouldSendFiles, units.Size(res.WouldSendBytes), entries(res.Deleted))
	} else if !c.quiet {
		summary(res)
	}
	if ev != nil {
		ev.summary(res)
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
	links := ""
	if r.Symlinks > 0 {
		links += fmt.Sprintf(", %d symbolic link(s)", r.Symlinks)
	}
	if r.HardLinks > 0 {
		links += fmt.Sprintf(", %d hard link(s)", r.HardLinks)
	}
	fmt.Fprintf(stderr, "farwing: %s %d file(s)%s, %s in %.2f s (data %.2f s, %s)%s%s, verified%s\n",
		what, len(r.Files), links, units.Size(r.Bytes), r.Seconds, r.DataSeconds, units.Rate(r.GoodputBps), retx, digest, skippedNote(r)+resumedNote(r)+keptNote(r)+deletedNote(r))
	if r.Limiter != nil && r.Bytes >= 64<<20 { // below that the start dominates: no verdict worth reading
		fmt.Fprintf(stderr, "farwing: rate held by %s\n", r.Limiter.Detail)
	}
}

// skippedNote is the summary's account of the files not sent because the destination had them
// ("" when there were none); on a push that is the remote's word, and the line says so.
func skippedNote(r *xfer.Result) string {
	if r.SkippedFiles == 0 {
		return ""
	}
	how := "same size and modification time"
	if r.Compare == "checksum" {
		how = "same size and BLAKE3"
	}
	whose := "already here"
	if r.Direction == "push" {
		whose = "already there, as the remote reports"
	}
	return fmt.Sprintf("; %d file(s), %s not sent: %s (%s)", r.SkippedFiles, units.Size(r.SkippedBytes), whose, how)
}

// resumedNote is the summary's account of what resuming an interrupted copy did not send (""
// when nothing was resumed).
func resumedNote(r *xfer.Result) string {
	if r.ResumedFiles == 0 {
		return ""
	}
	return fmt.Sprintf("; resumed %d file(s): %s kept from the interrupted copy, each block checked against the source", r.ResumedFiles, units.Size(r.ResumedBytes))
}

// keptNote is the summary's account of the changed files compared block by block ("" when none
// was).
func keptNote(r *xfer.Result) string {
	if r.DeltaFiles == 0 {
		return ""
	}
	return fmt.Sprintf("; %d changed file(s) compared block by block: %d block(s), %s, kept at the destination, %d block(s) sent",
		r.DeltaFiles, r.KeptBlocks, units.Size(r.KeptBytes), r.SentBlocks)
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

// pathMemory is where farwing copy keeps its records of paths (xfer.Options.PathMemory): this
// user's cache, ~/.cache/farwing/paths ("" where there is none).
func pathMemory() string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "farwing", "paths")
}

// deletedNote is the summary's account of what --delete removed ("" when nothing was).
func deletedNote(r *xfer.Result) string {
	if r.Deleted == 0 {
		return ""
	}
	whose := ""
	if r.Direction == "push" {
		whose = ", as the remote reports"
	}
	return fmt.Sprintf("; deleted %s the source does not have (--delete%s)", entries(r.Deleted), whose)
}

// listChanges prints on stdout, as rsync -v does, what a --dry-run copy would send (a name a line)
// and what --delete deletes ("deleting NAME"): with --dry-run always, otherwise with -v.
func listChanges(o *xfer.Options, verbose bool) {
	if o.DryRun {
		o.WouldSend = func(name string, _ int64) { fmt.Fprintln(stdout, escape.Text(name)) }
	}
	if o.DryRun || verbose {
		o.Deleted = func(d fcopy.Deletion) { fmt.Fprintln(stdout, "deleting "+escape.Text(d.Name)) }
	}
}

// entries is "1 entry" or "N entries".
func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
