package bootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// Installing the peer sends it in parts over the main ssh session, each acknowledged by the remote
// script (peerScript), so that the client knows the rate the single TCP stream really delivers.
// Where that rate would keep the upload going for more than a few seconds (a loss-based TCP on a
// lossy path: CUBIC moves a few hundred kbit/s at 3 % loss and 140 ms), the part of the file not yet
// handed to the main session is split among extra ssh connections, each writing its range into a
// part file on the remote (partScript); the main session keeps sending its own share and then
// re-sends the ranges of connections that failed or have not confirmed yet, and the remote joins
// the parts and checks the SHA-256 as for a single upload. An upload the main session delivers
// within a few seconds never opens a second connection.

// uploadTuning are the upload's constants (tests shrink them).
type uploadTuning struct {
	piece     int           // bytes in one part on the main session, at least
	pieceMax  int           // ... at most: a part holds pieceTime at the rate delivered
	pieceTime time.Duration //
	window0   int           // bytes written to the main session and not acknowledged, at least
	windowMax int           // ... at most: the window holds drain at the rate the main session delivers
	drain     time.Duration //
	rateSpan  time.Duration // the rate the window and the parts follow is over this long
	decide    time.Duration // how long the main session runs alone before its rate is judged
	slow      time.Duration // projected time left above which extra connections are opened
	helpers   int           // extra ssh connections (with the main session's, at most helpers+1 TCP streams)
	minShare  int           // the smallest range given to an extra connection
}

// defaultUpload: 64 KiB parts are acknowledged often enough to measure a few hundred kbit/s within
// the first seconds; where the rate is higher they grow to a tenth of a second of it, up to 1 MiB,
// since each part costs the remote shell a head process (some 7 ms here: 64 parts of a 4 MB upload
// took 0.5 s more than one), and a part is acknowledged only once all of it is there. The window
// holds a second of the rate delivered over the last quarter of a second (which follows TCP's slow
// start on a good path), at most 2 MiB, OpenSSH's own channel window, and at least 256 KiB, what
// TCP's slow start sends in the first round trips. Everything written to the main session is
// ahead of the join: once extra connections run, its window is at least one part, so that the
// join follows the last part another connection stores within about a second. Seven extra
// connections make eight TCP streams, below sshd's default MaxStartups of 10 unauthenticated
// connections. On the lab (400 Mbit/s, 140 ms, BBR, no loss) a first copy of 1 MiB takes about
// 0.1 s longer so than with the whole upload written at once (3 runs each); with a window of a
// second of the rate over the whole upload, at least 128 KiB, and the join sent only once every
// part was acknowledged, it took 0.55 s longer.
var defaultUpload = uploadTuning{piece: 64 << 10, pieceMax: 1 << 20, pieceTime: 100 * time.Millisecond,
	window0: 256 << 10, windowMax: 2 << 20, drain: time.Second, rateSpan: 250 * time.Millisecond,
	decide: 2 * time.Second, slow: 3 * time.Second, helpers: 7, minShare: 64 << 10}

// part is bytes off..off+n of the upload; on the remote, the file DIR/.farwing-HASH16.ID.OFF-N.tmp.
type part struct{ off, n int }

func (c part) String() string { return strconv.Itoa(c.off) + "-" + strconv.Itoa(c.n) }

// parseNumber reads a number of the upload's lines: decimal digits, no leading zero, at most 10.
func parseNumber(s string) (int, bool) {
	if s == "" || len(s) > 10 || len(s) > 1 && s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// parsePart reads "OFF-N" with N above 0.
func parsePart(s string) (part, bool) {
	a, b, ok := strings.Cut(s, "-")
	off, ok1 := parseNumber(a)
	n, ok2 := parseNumber(b)
	return part{off, n}, ok && ok1 && ok2 && n > 0
}

// uploadLine is a line of the remote script while the peer is uploaded: "FARWING-GOT OFF N" (a
// part of the main session stored), "FARWING-MISSING OFF-N ..." (parts named in the join that
// are not there) or, ending the upload, a status line (peerScript).
type uploadLine struct {
	got     part
	missing []part
	st      *peerStatus
}

// maxMissing bounds the parts a MISSING line may name (the join names fewer).
const maxMissing = 4096

// parseUploadLine parses a line the remote script writes during the upload (a status line too).
func parseUploadLine(line string) (uploadLine, error) {
	if rest, ok := strings.CutPrefix(line, "FARWING-GOT "); ok {
		f := strings.Split(strings.TrimRight(rest, "\r\n"), " ")
		if len(f) == 2 {
			off, ok1 := parseNumber(f[0])
			n, ok2 := parseNumber(f[1])
			if ok1 && ok2 && n > 0 {
				return uploadLine{got: part{off, n}}, nil
			}
		}
		return uploadLine{}, errors.New("malformed acknowledgement")
	}
	if rest, ok := strings.CutPrefix(line, "FARWING-MISSING "); ok {
		f := strings.Split(strings.TrimRight(rest, "\r\n"), " ")
		if len(f) > maxMissing {
			return uploadLine{}, errors.New("malformed list of missing parts")
		}
		var l uploadLine
		for _, t := range f {
			c, ok := parsePart(t)
			if !ok {
				return uploadLine{}, errors.New("malformed list of missing parts")
			}
			l.missing = append(l.missing, c)
		}
		return l, nil
	}
	st, err := parseStatus(line)
	if err != nil {
		return uploadLine{}, err
	}
	return uploadLine{st: &st}, nil
}

// partScript stores n bytes of its standard input as part c of upload id in dir, the remote's cache
// directory: at a temporary name first (mode 0600), renamed when all n bytes are there, and says
// "FARWING-STORED OFF-N". Anything else (a short input, no rename, a dir that is not private as
// the main session found it: privFunc) leaves nothing and says nothing. It works inside dir once
// it is found private (v enters it), by names relative to it: no one else can have left a file or
// a link at the temporary name ($$) or the part's, nor swap the directory they are in.
func partScript(dir, h16, id string, c part) string {
	return stripComments(render(partTemplate(), partScriptData{Priv: privFunc, Read: readFunc, Dir: shellQuote(dir),
		Q: ".farwing-" + h16 + "." + id, Part: c.String(), N: c.n}))
}

// helperCmd is the ssh command of an extra upload connection: the user's own command line (-F, -i,
// -p, -o, -J and farwing's ProxyCommand as the main session has them), on a TCP connection of its
// own (ControlPath=none: never riding on a shared one) and never asking for a password
// (BatchMode: one that cannot authenticate without fails, and its range goes back to the main
// session). These come first: ssh keeps the first value it is given. It runs script
// (remoteCommand).
func (s *session) helperCmd(ctx context.Context, host, script string) *exec.Cmd {
	return s.sshCmd(ctx, host, remoteCommand(script), false, "-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=yes")
}

// seg is a range of the upload and who carries it: the main session (its own share, or the range
// of an extra connection that failed), or an extra connection, whose range the main session may
// also send, in parts, when it has nothing of its own left.
type seg struct {
	off, end int
	next     int    // the main session has been handed off..next
	sent     []part // in these parts, from off, in order
	acked    int    // and has stored off..acked
	helper   int    // 0: the main session's from the start; i: extra connection i
	own      bool   // the main session must send it
	stored   bool   // its extra connection stored it whole
}

// mainSent: the main session has been handed all of it, so all of it is stored by the time the
// remote reads what is written next (the join).
func (g *seg) mainSent() bool { return g.next == g.end }

func (g *seg) done() bool { return g.mainSent() || g.stored }

// uploadReport is what an upload did.
type uploadReport struct {
	st       peerStatus // the remote's last word
	sessions int        // ssh sessions that carried parts (the main one included)
	extra    int64      // bytes handed to ssh beyond the upload's size: parts sent again
	prefaced bool       // the preface followed the join: the peer has it
}

type helperDone struct {
	i      int
	c      part
	ok     bool
	why    string
	copied int64         // bytes ssh read of its range
	took   time.Duration // from its start
}

type sentPart struct {
	g *seg
	c part
}

type wmsg struct {
	hdr  string
	body []byte
}

// uploader is one upload's state, kept by install's loop alone.
type uploader struct {
	s       *session
	t       uploadTuning
	host    string
	data    []byte
	segs    []*seg
	t0      time.Time
	setup   time.Duration // what another ssh connection costs before it carries anything (anotherConnection)
	acked   int           // bytes the main session acknowledged
	fifo    []sentPart    // the parts handed to it and not acknowledged, oldest first
	samples []ackSample   // its acknowledgements over the last rateSpan and one before
	flight  int           // bytes handed to the main session, not acknowledged
	handed  int64         // bytes handed to the main session
	split   bool          // extra connections were started (or it was decided not to)
	judged  bool          // the main session's rate was found good enough (said once)
	extras  int           // extra connections started
	shown   int           // bytes of the upload last told to Uploading
}

// install sends data (the peer in format) over p, the main session, whose remote script has said
// need with dir, its cache directory; where the main session is slow, over extra ssh connections
// too, each judged to cost setup before it carries anything (anotherConnection). It returns the remote's last status line. On an error, or a status other than ok, the
// session is closed.
//
// Where the main session carried every part (no extra connection ran), preface follows the join
// at once: the remote shell reads nothing of its input after the join (the parts are files by
// then), so the bytes wait there for the peer it starts, and the control channel does not wait
// a round trip for the remote's ok first (uploadReport.prefaced). Where extra connections ran,
// the remote may answer the join with missing parts and read on, so the preface waits for ok.
//
// With ahead (nil where none), the upload line and the first part went with the preface: the
// upload goes on from there.
func (s *session) install(ctx context.Context, host string, p *Peer, setup time.Duration, dir, h16, format string, data, preface []byte, ahead *ahead) (uploadReport, error) {
	t := defaultUpload
	if s.upload != nil {
		t = *s.upload
	}
	var idb [8]byte
	rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	u := &uploader{s: s, t: t, host: host, data: data, setup: setup, segs: []*seg{{end: len(data), own: true}}}
	if ahead != nil {
		id = ahead.id
		g, c := u.segs[0], part{0, aheadPart}
		g.next, g.sent = c.n, []part{c}
		u.fifo, u.flight, u.handed = []sentPart{{g, c}}, c.n, int64(c.n)
	}

	// The writer: the header, then what the loop hands it. After a failed write it discards the
	// rest; the reader tells why the session ended.
	msgs := make(chan wmsg)
	werr := make(chan error, 1)
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		<-p.prefaced // the remote has read the preface (it said need after dropping it)
		var err error
		if ahead == nil {
			if _, err = fmt.Fprintf(p.Stdin, "FARWING-UPLOAD %s %d %s\n", format, len(data), id); err != nil {
				werr <- err
			}
		}
		for m := range msgs {
			if err != nil {
				continue
			}
			if _, err = io.WriteString(p.Stdin, m.hdr); err == nil && len(m.body) > 0 {
				_, err = p.Stdin.Write(m.body)
			}
			if err != nil {
				werr <- err
			}
		}
	}()
	// The reader: lines until a status line (what follows it is the control channel) or an error.
	type read struct {
		l   uploadLine
		err error
	}
	lines := make(chan read)
	quit := make(chan struct{})
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		for {
			l, err := p.uploadLine(host)
			select {
			case lines <- read{l, err}:
			case <-quit:
				return
			}
			if err != nil || l.st != nil {
				return
			}
		}
	}()
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan helperDone, t.helpers)
	var hwg sync.WaitGroup
	// On the way out nothing is running: the extra connections ended, the writer idle and the
	// reader past its last line (an error path closes the session first, which ends both).
	defer func() {
		close(quit)
		close(msgs)
		hcancel()
		hwg.Wait()
		<-wdone
		<-rdone
	}()
	fail := func(err error) (uploadReport, error) {
		p.Close(time.Second)
		return uploadReport{}, err
	}

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	u.t0 = time.Now()
	var broken error // a write to the main session failed
	joined, joins, early := false, 0, false
	var helperBytes int64 // what the extra connections' ssh read of their ranges
	for {
		var out chan wmsg
		var m wmsg
		var g *seg
		var c part
		if broken == nil && !joined {
			if g, c = u.nextPart(); g != nil {
				out, m = msgs, wmsg{hdr: fmt.Sprintf("FARWING-PART %d %d\n", c.off, c.n), body: data[c.off : c.off+c.n]}
			} else if u.complete() {
				out, m = msgs, wmsg{hdr: "FARWING-JOIN " + u.join() + "\n"}
				if u.extras == 0 {
					m.body = preface
				}
			}
		}
		select {
		case out <- m:
			if g == nil {
				joined, joins, early = true, joins+1, early || len(m.body) > 0
				hcancel() // the rest of what extra connections carry is not needed
				continue
			}
			g.next += c.n
			g.sent = append(g.sent, c)
			u.fifo = append(u.fifo, sentPart{g, c})
			u.flight += c.n
			u.handed += int64(c.n)
		case r := <-lines:
			if r.err != nil { // the reader has ended ssh
				return fail(r.err)
			}
			switch l := r.l; {
			case l.st != nil:
				if l.st.State != "ok" {
					p.Close(3 * time.Second) // the remote has stopped reading: ends the writer too
				}
				hcancel()
				hwg.Wait()
				for len(hdone) > 0 {
					helperBytes += (<-hdone).copied
				}
				rep := uploadReport{st: *l.st, sessions: 1 + u.extras, extra: max(0, u.handed+helperBytes-int64(len(data))), prefaced: early}
				u.summary(rep)
				return rep, nil
			case l.missing != nil && !joined:
				return fail(fmt.Errorf("%w: %s named missing parts of the upload before it was asked to join them", ErrSSH, host))
			case l.missing != nil && early:
				// The main session carried every part, so the remote cannot lack one unless its
				// files went in between; the preface after the join is already its input.
				return fail(fmt.Errorf("%w on %s: parts of the upload (%s) are gone from its cache directory; nothing was run, try again",
					ErrInstall, host, partList(l.missing)))
			case l.missing != nil:
				if joins > 1 {
					return fail(fmt.Errorf("%w on %s: parts of the upload written by other ssh connections (%s) are not there; does %s name more than one machine? Nothing was run; try again",
						ErrInstall, host, partList(l.missing), host))
				}
				if err := u.missing(l.missing); err != nil {
					return fail(err)
				}
				joined = false
			default:
				if err := u.got(l.got); err != nil {
					return fail(err)
				}
			}
		case h := <-hdone:
			helperBytes += h.copied
			u.helperDone(h)
		case err := <-werr:
			broken = err // the reader tells why; nothing more is written
		case <-tick.C:
			if !u.split {
				u.maybeSplit(hctx, dir, h16, id, hdone, &hwg)
			}
		}
		u.progress()
	}
}

// nextPart is the part the main session sends next (nil when none may be sent now): first from
// its own ranges, then, once extra connections run, from theirs that are not stored yet; never
// more than the window unacknowledged.
func (u *uploader) nextPart() (*seg, part) {
	var g *seg
	for _, s := range u.segs {
		if s.own && s.next < s.end {
			g = s
			break
		}
	}
	if g == nil {
		for _, s := range u.segs {
			if !s.own && !s.done() && s.next < s.end {
				g = s
				break
			}
		}
	}
	if g == nil {
		return nil, part{}
	}
	n := max(u.t.piece, min(u.t.pieceMax, int(u.rate()*u.t.pieceTime.Seconds())))
	n = min(n, g.end-g.next)
	if u.flight > 0 && u.flight+n > u.window() {
		return nil, part{}
	}
	return g, part{g.next, n}
}

// window is how much the main session may have unacknowledged: drain at the rate it delivers,
// at least window0 (one part once extra connections run: what it has in flight then delays the
// join), at most windowMax.
func (u *uploader) window() int {
	least := u.t.window0
	if u.extras > 0 {
		least = u.t.piece
	}
	return min(u.t.windowMax, max(least, int(u.rate()*u.t.drain.Seconds())))
}

// rate is what the main session delivered over the last rateSpan, as its acknowledgements tell
// (since the upload began when that is shorter): recent, so that it follows TCP's slow start on a
// good path instead of holding it back.
func (u *uploader) rate() float64 {
	now := time.Since(u.t0)
	base, i := ackSample{}, 0
	for ; i < len(u.samples) && u.samples[i].t <= now-u.t.rateSpan; i++ {
		base = u.samples[i]
	}
	if i > 1 {
		u.samples = u.samples[i-1:] // older ones will not be a base again
	}
	if now <= base.t {
		return 0
	}
	return float64(u.acked-base.acked) / (now - base.t).Seconds()
}

// ackSample is how much the main session had acknowledged t into the upload.
type ackSample struct {
	t     time.Duration
	acked int
}

// complete: every byte is stored, or is in a part handed to the main session, which stores it
// before it reads the join: waiting for its acknowledgements would cost a round trip.
func (u *uploader) complete() bool {
	for _, g := range u.segs {
		if !g.done() {
			return false
		}
	}
	return true
}

// join names the parts that make the upload, in order: a range the main session was handed all
// of in its parts, else the one part its extra connection stored.
func (u *uploader) join() string {
	var b strings.Builder
	for _, g := range u.segs {
		if g.mainSent() {
			for _, c := range g.sent {
				b.WriteString(c.String() + " ")
			}
		} else {
			b.WriteString(part{g.off, g.end - g.off}.String() + " ")
		}
	}
	return strings.TrimSuffix(b.String(), " ")
}

// got takes the main session's acknowledgement of c, which must be of the oldest part it has not
// acknowledged (the remote stores them in the order sent).
func (u *uploader) got(c part) error {
	if len(u.fifo) == 0 || u.fifo[0].c != c || u.fifo[0].g.acked != c.off {
		return fmt.Errorf("%w: %s acknowledged a part it was not sent next (%s)", ErrSSH, u.host, c)
	}
	u.fifo[0].g.acked += c.n
	u.fifo = u.fifo[1:]
	u.flight -= c.n
	u.acked += c.n
	u.samples = append(u.samples, ackSample{time.Since(u.t0), u.acked})
	return nil
}

// missing makes the main session send the ranges of extra connections that the remote did not find.
func (u *uploader) missing(cs []part) error {
	for _, c := range cs {
		found := false
		for _, g := range u.segs {
			if g.off == c.off && g.end == c.off+c.n && g.stored && !g.mainSent() {
				g.stored, g.own, found = false, true, true
				u.s.logf("upload: bytes %d-%d, which ssh connection %d stored, are not where the main session's are; it sends them", g.off, g.end, g.helper)
			}
		}
		if !found {
			return fmt.Errorf("%w on %s: the remote says part %s of the upload is missing, which was not sent elsewhere; nothing was run, try again", ErrInstall, u.host, c)
		}
	}
	return nil
}

// helperDone takes an extra connection's end: its range stored, or back to the main session.
func (u *uploader) helperDone(h helperDone) {
	for _, g := range u.segs {
		if g.helper != h.i {
			continue
		}
		switch {
		case h.ok:
			g.stored = true
			u.s.logf("upload: ssh connection %d stored bytes %d-%d in %.1fs", h.i, g.off, g.end, h.took.Seconds())
		case !g.done():
			g.own = true
			u.s.logf("upload: ssh connection %d (bytes %d-%d) failed (%s); the main session sends its part", h.i, g.off, g.end, h.why)
		}
	}
}

// maybeSplit opens the extra connections when the main session, after running alone for decide,
// would take more than slow to finish at the rate it delivers, plus what starting the main
// session took: each extra connection costs about that before it carries anything (an ssh
// handshake over the same path, on the same CPUs), so a split must gain more than that. The part
// not yet handed to the main session is split between it (its share less what it still has to
// deliver) and them.
func (u *uploader) maybeSplit(ctx context.Context, dir, h16, id string, done chan<- helperDone, wg *sync.WaitGroup) {
	ran := time.Since(u.t0)
	if ran < u.t.decide {
		return
	}
	main := u.segs[0]
	rest := len(u.data) - main.next
	k := min(u.t.helpers, rest/max(1, u.t.minShare))
	if k < 1 {
		u.split = true // too little left to be worth a connection
		return
	}
	rate := float64(u.acked) / ran.Seconds()
	left := math.Inf(1)
	if rate > 0 {
		left = float64(len(u.data)-u.acked) / rate
	}
	if left <= (u.t.slow + u.setup).Seconds() {
		if !u.judged {
			u.judged = true
			u.s.logf("upload at %.0f kB/s after %.1fs, %.0f s to go: one ssh session (another would take %.1fs to start)",
				rate/1e3, ran.Seconds(), left, u.setup.Seconds())
		}
		return
	}
	u.split = true
	share := max(0, rest/(k+1)-u.flight)
	share -= share % u.t.piece
	main.end = main.next + share
	off, remain := main.end, len(u.data)-main.end
	each := float64(remain) / float64(k)
	for i := 1; i <= k; i++ {
		n := remain / (k - i + 1)
		g := &seg{off: off, end: off + n, next: off, acked: off, helper: i}
		u.segs = append(u.segs, g)
		c := part{off, n}
		off, remain = off+n, remain-n
		wg.Add(1)
		go func() {
			defer wg.Done()
			done <- u.runHelper(ctx, i, dir, h16, id, c)
		}()
	}
	u.extras = k
	how := fmt.Sprintf("nothing stored after %.1fs", ran.Seconds())
	if rate > 0 {
		how = fmt.Sprintf("%.0f kB/s after %.1fs, %.0f s to go at that rate", rate/1e3, ran.Seconds(), left)
	}
	u.s.logf("upload slow (%s): %d more ssh connections, %.0f kB each; the main session keeps %.0f kB more",
		how, k, each/1e3, float64(share)/1e3)
}

// runHelper runs extra connection i, which stores part c.
func (u *uploader) runHelper(ctx context.Context, i int, dir, h16, id string, c part) helperDone {
	cmd := u.s.helperCmd(ctx, u.host, partScript(dir, h16, id, c))
	in := &countingReader{r: bytes.NewReader(u.data[c.off : c.off+c.n])}
	cmd.Stdin = in
	out, errs := &tail{}, &tail{}
	cmd.Stdout, cmd.Stderr = out, errs
	if u.s.Verbose {
		cmd.Stderr = io.MultiWriter(escape.NewWriter(os.Stderr), errs)
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Second
	t0 := time.Now()
	err := cmd.Run()
	h := helperDone{i: i, c: c, copied: in.n.Load(), took: time.Since(t0)}
	switch {
	case err == nil && out.String() == "FARWING-STORED "+c.String()+"\n":
		h.ok = true
	case ctx.Err() != nil:
		h.why = "no longer needed"
	case err != nil:
		h.why = err.Error()
		if m := lastMeaningful(errs.String()); m != "" {
			h.why += ": " + escape.Text(m)
		}
	default:
		h.why = "it did not confirm the part: " + escape.Quote(strings.TrimSpace(out.String()))
	}
	return h
}

// progress tells Uploading how much of the upload is stored, when that grew.
func (u *uploader) progress() {
	n := 0
	for _, g := range u.segs {
		if g.stored || g.acked == g.end {
			n += g.end - g.off
		} else {
			n += g.acked - g.off
		}
	}
	if n > u.shown {
		u.shown = n
		if u.s.Uploading != nil {
			u.s.Uploading(int64(n), int64(len(u.data)))
		}
	}
}

// summary says (-v) how the upload went.
func (u *uploader) summary(r uploadReport) {
	took := time.Since(u.t0).Seconds()
	if u.extras == 0 {
		u.s.logf("upload: %d bytes in %.1fs over the main ssh session (%.0f kB/s)", len(u.data), took, float64(len(u.data))/took/1e3)
		return
	}
	stored := 0
	for _, g := range u.segs {
		if g.helper > 0 && g.stored && !g.mainSent() {
			stored++
		}
	}
	u.s.logf("upload: %d bytes in %.1fs over %d ssh connections (%d of the %d extra ones' parts used; %d bytes sent again)",
		len(u.data), took, r.sessions, stored, u.extras, r.extra)
}

func partList(cs []part) string {
	var s []string
	for _, c := range cs[:min(len(cs), 4)] {
		s = append(s, c.String())
	}
	if len(cs) > 4 {
		s = append(s, "…")
	}
	return strings.Join(s, " ")
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// muxedHandshake is how many times a session over a shared connection (its channel's round trip,
// the remote shell and the peer's start) a new ssh connection takes: ssh's own handshake is some
// 13 round trips where the shared session needs two. On the lab (140 ms) a session over the shared
// connection answered in 0.35 s and a new connection in 1.95 s (0 %) to 2–6 s (3 % loss).
const muxedHandshake = 6

// anotherConnection is what an extra ssh connection for the upload costs before it carries
// anything, judged from setup, the time from ssh's start to the remote's first line of the main
// session: about as much where that session made its own connection, muxedHandshake times as much
// where it rode the shared one. (Taking the shared session's time for it, first copies over a
// shared connection at 3 % loss opened seven more connections that then took 5.9–8.9 s, where the
// main session alone installed in 1.4–2.0 s.)
func anotherConnection(setup time.Duration, muxed bool) time.Duration {
	if muxed {
		return muxedHandshake * setup
	}
	return setup
}
