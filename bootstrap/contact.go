package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// First contact is a list of attempts, each one ssh session running the start script
// (peerScript). Another attempt is made only where one is given up, for one of the reasons below,
// which is said where it is given up (Notice or -v) and kept in the next attempt
// (session.attempts); anything else ends first contact: the peer runs, or an error says why not.
//
//	attempt              its connection                                upload's start ahead  plan
//	the first            the shared one where it answered (checkMux),  where no record says  its own
//	                     whose first line must come within muxAnswer   the account has it
//	after muxSilent      a new one (ssh makes a new master), no limit  none                  the one before's
//	after wrongSelfHash  as the first's                                none                  its own
//	after damagedGzip    as the first's                                none                  its own
//	after xzFailed       as the first's                                none                  its own, without xz
//
// The plan is what the attempt guesses and prepares before its session starts: the build the
// account is likely to run, its upload's start or its compression meanwhile, and the time Took
// counts from.

// reason is why an attempt was given up, and so what the next one does.
type reason int

const (
	// muxSilent: the session over the shared connection did not answer within muxAnswer (a
	// network change left the connection dead). Its master is ended and its socket removed
	// (dropMux), and the next attempt goes over a new connection without a time limit, with
	// nothing ahead: what the dead session carried may still reach the remote's shell, and its
	// upload of the same ID would remove or overwrite the new one's parts (the hash check would
	// refuse the result; the copy would fail for nothing).
	muxSilent reason = iota + 1
	// wrongSelfHash: the remote needs this executable, and the SHA-256 that named it came from
	// this user's record (selfHash), which was wrong: what is uploaded must be this executable.
	// The record is removed and the next attempt installs the real build, with nothing ahead.
	wrongSelfHash
	// damagedGzip: the remote needs the guessed build, whose gzip form went ahead, and that form
	// does not unpack to the build; its start is the remote's input already. The next attempt
	// goes without it, nothing ahead (payload makes the gzip form anew).
	damagedGzip
	// xzFailed: the build went in its xz form and what the remote's xz made of it did not have
	// the build's SHA-256 (badhash: nothing was run). An xz that cannot unpack what another made
	// (a decoder without the x86 filter, a stand-in of that name) is the likely cause, so the next
	// attempt, and every one after it, sends the gzip form, with nothing ahead.
	xzFailed
)

// attempt is one ssh session of first contact.
type attempt struct {
	after reason // why the attempt before it was given up (0: it is the first)
	why   string // ... as it was said
	ahead bool   // an upload's start may go ahead of the remote's answer (ahead.go)
	muxed bool   // it rides on the shared connection that answered checkMux: its first line must come within muxAnswer
	noXz  bool   // never the xz form (xzFailed)
}

// plan is what an attempt decided before its ssh session started.
type plan struct {
	t0     time.Time       // when it was made: Took counts from here
	recs   installRecords  // this user's records of the builds installed on the account
	guess  int             // the build guessed (c.builds' index): the one last found on the account, else this platform's
	up     *ahead          // the guess's upload start, written ahead of the answer (nil: none)
	packed chan packedPeer // the guess's gzip form, compressed meanwhile (nil: not)
}

// firstContact installs a build of c where the remote needs it and starts it as `farwing serve
// serveArgs`: attempts, until one starts the peer or fails for good.
func (s *session) firstContact(ctx context.Context, host string, c catalog, serveArgs []string, preface []byte) (*Peer, error) {
	a := attempt{ahead: !s.noAhead, muxed: s.muxLive}
	var pl *plan
	for {
		s.attempts = append(s.attempts, a)
		if a.after != muxSilent {
			pl = s.plan(host, c, preface, a.ahead)
		}
		p, next, err := s.try(ctx, host, c, pl, serveArgs, preface, a)
		if next == nil {
			return p, err
		}
		a = *next
	}
}

// plan makes an attempt's plan: the guess, what goes ahead where ahead allows it, and what is
// compressed meanwhile.
func (s *session) plan(host string, c catalog, preface []byte, ahead bool) *plan {
	pl := &plan{t0: time.Now(), recs: installedRecords(s.installedDir, s.cfg, host)}
	// The guess: the build this user last found on that account, else the one for this
	// executable's platform, where no record says the account has it (upload ahead).
	guess, known := c.own(), false
	for i, b := range c.builds {
		if rec := pl.recs.of(b.hash); rec != "" {
			if _, err := os.Stat(rec); err == nil {
				guess, known = i, true
				break
			}
		}
	}
	pl.guess = guess
	g := c.builds[guess]
	// A build whose compressed form is not in this user's cache has most likely never been
	// installed anywhere: compress it while ssh connects. One that is there but was never
	// installed on this host's account starts its upload at once (ahead.go).
	if !known && pl.recs.of(g.hash) != "" && ahead && len(preface) <= aheadMaxPreface {
		pl.up = newAhead(s.peerDir, g)
	}
	if pc := packedCache(s.peerDir, g); pc != "" && pl.up == nil {
		if _, err := os.Stat(pc); err != nil {
			pl.packed = make(chan packedPeer, 1)
			go func() {
				b, err := payload(s.peerDir, g, "gzip")
				pl.packed <- packedPeer{b, err}
			}()
		}
	}
	if pl.up != nil {
		s.logf("no record of farwing %s on %s: its upload starts with the ssh session (%d bytes ahead of the answer)", g.h16(), escape.Text(host), aheadLen)
	}
	return pl
}

// try runs attempt a with its plan pl: the peer it started, or the next attempt where it was
// given up, or the error that ends first contact.
func (s *session) try(ctx context.Context, host string, c catalog, pl *plan, serveArgs []string, preface []byte, a attempt) (*Peer, *attempt, error) {
	var qa []string
	for _, arg := range serveArgs {
		qa = append(qa, shellQuote(arg))
	}
	args := strings.Join(qa, " ")
	up, n := pl.up, 0
	if !a.ahead {
		up = nil
	}
	if up != nil {
		n = aheadLen
	}
	within := time.Duration(0)
	if a.muxed {
		within = muxAnswer
	}
	p, st, err := s.run(ctx, host, peerScript(c, pl.guess, args, len(preface), n), preface, up, within)
	if errors.Is(err, errMuxSilent) {
		// The shared connection's master is there, but its connection carries nothing: drop it,
		// and start again over a new one.
		why := fmt.Sprintf("the shared ssh connection to %s did not answer within %s; closing it and connecting again", escape.Text(host), muxAnswer)
		s.notice(why)
		s.dropMux(ctx, host)
		return nil, &attempt{after: muxSilent, why: why, noXz: a.noXz}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	p.serve = append([]string{"farwing", "serve"}, serveArgs...)
	setup := anotherConnection(time.Since(p.began), a.muxed) // what another connection costs before it carries anything
	i := c.find(platformOf(st.OS, st.Arch))
	if st.State == "ok" {
		if up != nil {
			// The peer answers once it has read the preface, and the caller may write to it
			// then (a pull's accept): only after the bytes serve skips, or it drops the caller's
			// instead and reads the upload's start as control messages.
			close(p.skipped)
			select {
			case <-p.prefaced:
			case <-ctx.Done():
				p.Close(time.Second)
				return nil, nil, ctx.Err()
			}
		}
		if i >= 0 {
			noteInstalled(pl.recs.of(c.builds[i].hash))
		}
		p.RemoteOS, p.Path, p.Took = st.OS+" "+st.Arch, st.Path, time.Since(pl.t0)
		return p, nil, nil
	}
	fail := func(err error) (*Peer, *attempt, error) {
		p.Close(3 * time.Second)
		return nil, nil, err
	}
	// The next attempt, where this one is given up for r (said with -v as why): it carries
	// nothing ahead, and rides on the shared connection where the first did.
	retry := func(r reason, why string) (*Peer, *attempt, error) {
		s.logf("%s", why)
		return nil, &attempt{after: r, why: why, muxed: s.muxLive, noXz: a.noXz || r == xzFailed}, nil
	}
	if err := refusal(c, i, host, st); err != nil {
		return fail(err)
	}
	b := c.builds[i]
	if i != pl.guess {
		up = nil // the shell dropped the guessed build's start: this one is uploaded from its start
	}
	if b.exe != "" {
		// The build's hash may come from this user's cache (selfHash), where anyone who can
		// write that directory could also leave a compressed form to match: what is uploaded
		// must be this executable, so it is hashed again before anything of it is sent (an
		// install's 20 ms).
		if real, err := hashFile(b.exe); err != nil {
			return fail(fmt.Errorf("cannot read this program's own executable: %w", err))
		} else if real != b.hash {
			p.Close(3 * time.Second)
			forgetSelf(s.selfDir(), b.exe)
			c.builds[i].hash = real
			return retry(wrongSelfHash, fmt.Sprintf("this program's recorded SHA-256 was not its own (record removed); connecting again to install %s", real[:16]))
		}
	}
	format := b.format(st.Formats, a.noXz)
	var data []byte
	switch {
	case up != nil && format == up.format: // the shell kept what was written ahead (start.sh's rule)
		if <-up.done; !up.valid {
			p.Close(3 * time.Second)
			return retry(damagedGzip, "the gzip form of this build is damaged; connecting again to upload a new one")
		}
		data = up.data
	case format == "gzip" && pl.packed != nil && i == pl.guess:
		r := <-pl.packed
		data, err = r.data, r.err
	default:
		up = nil // without its format's tool the shell dropped what was written ahead
		data, err = payload(s.peerDir, b, format)
	}
	if err != nil {
		return fail(fmt.Errorf("cannot read the peer for %s: %w", b.platform, err))
	}
	if s.Notice != nil {
		s.Notice(fmt.Sprintf("installing farwing on %s (%s, %.1f MB)", escape.Text(host), b.platform, float64(len(data))/1e6))
	}
	rep, err := s.install(ctx, host, p, setup, st.Path, b.h16(), format, data, preface, up)
	if err != nil {
		return nil, nil, err
	}
	if st = rep.st; st.State == "badhash" && format == "xz" { // install has closed the session
		return retry(xzFailed, fmt.Sprintf("the xz on %s did not unpack the build to its SHA-256 (nothing was run); connecting again to upload it with gzip", escape.Text(host)))
	}
	if st.State != "ok" {
		return nil, nil, fmt.Errorf("%w on %s: the uploaded build did not check out (%s); nothing was run, try again", ErrInstall, host, escape.Text(st.State))
	}
	noteInstalled(pl.recs.of(b.hash))
	// The control channel starts now, with the preface again (the first one went to the shell):
	// already written after the join where the main session carried the whole upload.
	p.prefaced = make(chan struct{})
	if rep.prefaced {
		close(p.prefaced)
	} else {
		go p.writePreface(preface, nil)
	}
	p.Uploaded, p.SentBytes, p.Format = true, int64(len(data)), format
	p.UploadSessions, p.ResentBytes, p.Ahead = rep.sessions, rep.extra, up != nil
	p.RemoteOS, p.Path, p.Took = st.OS+" "+st.Arch, st.Path, time.Since(pl.t0)
	return p, nil, nil
}

// refusal is the error for a remote whose first answer, st, was neither ok nor a need this
// executable can meet (i: the index in c of the build for its platform, -1 none); nil for a need
// it can.
func refusal(c catalog, i int, host string, st peerStatus) error {
	switch {
	case st.State != "need" && st.State != "nodir" && st.State != "nohash" && st.State != "unsafe":
		return fmt.Errorf("%w: unexpected answer from %s: %s", ErrSSH, host, escape.Text(st.State))
	case i < 0:
		return c.noBuild(host, st.OS, st.Arch)
	case st.State == "nodir":
		return fmt.Errorf("%w on %s: its cache directory %s cannot be created or written; fix its permissions, or set XDG_CACHE_HOME for that account",
			ErrInstall, host, escape.Text(st.Path))
	case st.State == "unsafe":
		return unsafeCache(host, st)
	case st.State == "nohash":
		return fmt.Errorf("%w on %s: it has no SHA-256 tool (openssl, sha256sum, shasum or sha256), so the uploaded build could not be checked before it runs; install coreutils or openssl there",
			ErrInstall, host)
	}
	return nil
}

// unsafeCache is the error for a remote whose cache directory is not private (the status unsafe):
// what is wrong, by whom it could be used, and the fix, as privdir says it for this user's own.
func unsafeCache(host string, st peerStatus) error {
	dir := escape.Text(st.Path)
	why := map[string]string{
		"link":  "is a symbolic link; remove it there (farwing makes the directory itself), or set XDG_CACHE_HOME for that account",
		"owner": "belongs to another user; remove it there (farwing makes the directory itself), or set XDG_CACHE_HOME for that account",
		"mode":  "can be written by other users, who could replace the build farwing runs from it; run chmod go-w " + shellQuote(dir) + " there",
	}[st.Why]
	return fmt.Errorf("%w on %s: its cache directory %s %s", ErrInstall, escape.Text(host), dir, why)
}
