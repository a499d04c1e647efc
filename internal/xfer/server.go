package xfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// sshEnds reads SSH_CONNECTION ("client-ip client-port server-ip server-port"): the client's
// address and the one it reached, IPv4-mapped ones unmapped; invalid where it says nothing usable.
func sshEnds(conn string) (client, server netip.Addr) {
	f := strings.Fields(conn)
	if len(f) != 4 {
		return netip.Addr{}, netip.Addr{}
	}
	client, _ = netip.ParseAddr(f[0])
	server, _ = netip.ParseAddr(f[2])
	return client.Unmap(), server.Unmap()
}

// ServeOptions are the remote peer's surroundings.
type ServeOptions struct {
	// SSHConnection is the SSH_CONNECTION the peer was started with ("client-ip client-port
	// server-ip server-port"): the address family to bind, and the address the client reached.
	SSHConnection string
	// Lanes opens the peer's four lanes on bind (nil: UDP sockets, in Ports).
	Lanes LaneOpener
	// Ports is the range the lanes' UDP ports must lie in (farwing copy --port; zero: any).
	Ports session.PortRange
	// Tuning is this end's environment's switches, read once by cmd/farwing (tuning.FromEnv).
	Tuning tuning.Settings
	// DebugLog is where the engines print their state (a line per call, without its newline;
	// nil: nowhere) when Tuning.Debug is on or the client's hello asks for it.
	DebugLog func(format string, args ...any)
	// CheckpointEvery is Options.CheckpointEvery for this end's writer (a push's receiver).
	CheckpointEvery int64
	// ChannelOnly is Options.ChannelOnly for this end.
	ChannelOnly bool
	// Roles are the roles this peer serves besides a copy's, by the name a hello gives (RoleBench:
	// internal/benchpeer, RoleDoctor: internal/doctorpeer; cmd/farwing's serve registers both).
	Roles map[string]Role
}

// Serve is the remote peer: it speaks the control protocol on r/w (the ssh session) and runs the
// receiving (push) or sending (pull) end, or the role the hello asks for (ServeOptions.Roles). It
// ends as soon as the control channel does, and when the client has been silent for PeerIdle
// where it owes a message or data.
func Serve(ctx context.Context, r io.Reader, w io.Writer, clientPub string, so ServeOptions) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctl := NewControl(r, w, nil)
	ctl.channelOnly = so.ChannelOnly
	ctl.Start(cancel)
	fail := func(err error) error {
		ctl.SendError(err)
		return err
	}
	cpub, err := decodePub(clientPub)
	if err != nil {
		return fail(fmt.Errorf("farwing serve needs the client's --pub key (%v); the client and this peer differ", err))
	}
	priv, err := newKex()
	if err != nil {
		return fail(err)
	}
	key, connID, err := sessionKey(priv, cpub, cpub.Bytes(), priv.PublicKey().Bytes())
	if err != nil {
		return fail(err)
	}
	crypto, err := wire.NewCrypto(key, connID, wire.ServerToClient)
	if err != nil {
		return fail(err)
	}
	// Bind the address family the client reached us with, and report the address it used.
	sshClient, sshServer := sshEnds(so.SSHConnection)
	bind, addr := "0.0.0.0:0", ""
	if sshClient.IsValid() && !sshClient.Is4() {
		bind = "[::]:0"
	}
	if sshServer.IsValid() {
		addr = sshServer.String()
	}
	open := so.Lanes
	if open == nil {
		open = func(bind string) ([session.Lanes]lane.PacketConn, error) {
			return session.ListenUDPRange(bind, so.Ports, so.Tuning.Lane(0))
		}
	}
	conns, err := open(bind)
	if err != nil {
		return fail(err)
	}
	path := session.NewPath(conns, crypto, true)
	defer path.Close()
	// The client copies its first messages on the lanes as it opens them: whichever copy of the
	// hello and the list comes first is taken (its preface may lose a segment of ssh's TCP).
	path.OnControl(ctl.Offer)
	if so.Tuning.Debug {
		path.SetDebugLog(so.DebugLog)
	}
	// Announce the lanes at once: the client starts its UDP handshake while its hello is still on
	// the way.
	if err := ctl.Send(Msg{T: KindReady, Version: Version, Proto: Proto, Ports: path.Ports(), Addr: addr,
		Pub: encodePub(priv.PublicKey())}); err != nil {
		return err
	}
	// The hello travels with the ssh session's start (the client's preface).
	hello, err := ctl.Expect(ctx, KindHello, PeerIdle)
	if errors.Is(err, ErrProtocol) {
		return fail(err) // the client hears why its hello was refused
	}
	if err != nil {
		return err
	}
	if hello.Debug {
		path.SetDebugLog(so.DebugLog)
	}
	if hello.Proto != Proto {
		return fail(fmt.Errorf("the remote farwing speaks control protocol %d, the client %d; upgrade one of them", Proto, hello.Proto))
	}
	// A CPU profile only where this end's own environment asks for one (FARWING_CPUPROFILE), at
	// its own prefix: the client's hello.Profile would be a path of the client's choosing.
	defer tuning.StartProfile(so.Tuning.Profile, "serve")()
	if dl := path.DebugLog(); dl != nil && hello.Profile != "" && so.Tuning.Profile == "" {
		dl("not profiling: the client asked for a CPU profile; set %s in this end's environment (sshd's SetEnv) for one", tuning.ProfileEnv)
	}
	// failLinger reports an error and keeps the lanes up until the client leaves, so that a client
	// in the middle of its UDP handshake sees this error rather than a silent port.
	failLinger := func(err error) error {
		fail(err)
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
			_, rerr := ctl.Next(ctx, time.Until(end))
			var re *RemoteError
			if rerr != nil && !errors.As(rerr, &re) {
				break
			}
		}
		return err
	}

	cmp, err := fcopy.ParseCompare(hello.Compare)
	if err != nil {
		return fail(fmt.Errorf("%w: hello: %v", ErrProtocol, err))
	}
	if hello.Role == RoleRecv || hello.Role == RoleSend {
		// What this end says before the data (a push's have, a pull's files and list) is copied
		// on the lanes as well, to the ssh client's address before it is proven
		// (session.Path.SendControlEarly); the receiver's copies go on in the data phase (runRecv).
		// A pull's probe need not wait for a proven lane there either (SendTrainOnHello).
		path.SetSSHClient(sshClient)
		ctl.Mirror(path.SendControlEarly)
		// A client whose UDP handshake gets no answer asks for TCP streams instead (streams.go).
		ctl.Aside(KindStreams, offerStreams(ctx, ctl, path, bind, so.Ports, func(err error) { ctl.SendError(err); cancel(err) }))
	}
	switch hello.Role {
	case RoleRecv:
		filter, err := fcopy.NewFilter(hello.Filter) // --delete's protection
		if err != nil {
			return failLinger(fmt.Errorf("%w: hello: %v", ErrProtocol, err))
		}
		// The file list follows the hello in chunks, each checked as it arrives.
		if hello.Files, err = recvList(ctx, ctl, hello.Entries); err != nil {
			var re *RemoteError
			if errors.As(err, &re) {
				return err
			}
			return failLinger(err)
		}
		plan, err := fcopy.NewPlan(hello.Files)
		if err != nil {
			return failLinger(err)
		}
		// This end is the receiver: it tells the client which files it already has, before any
		// data, and they leave the plan at both ends.
		var target *fcopy.Target
		var have []int
		var parts *fcopy.Partials // what interrupted copies left to resume
		var deltas *fcopy.Deltas  // changed files, compared block by block
		if !hello.Sink {
			if target, have, err = fcopy.ResolveTargetHave(expandHome(hello.Dest), hello.Files, cmp); err != nil {
				return failLinger(err)
			}
			if hello.DryRun {
				return dryRecv(ctl, hello, target, have, filter)
			}
			parts = target.FindPartials(hello.Files, have, hello.NoResume)
			defer parts.Close(target)
			deltas = target.FindDeltas(hello.Files, have, hello.WholeFile, hello.Preserve)
		}
		if err := plan.Skip(have); err != nil {
			return failLinger(err)
		}
		if err := ctl.Send(Msg{T: KindHave, Have: have, Resume: parts.Offers(), Delta: deltas.Offers()}); err != nil {
			return err
		}
		if deltas != nil {
			deltas.Hash(ctx, plan) // while the offer travels, and any resume is settled
		}
		if len(parts.Offers()) > 0 {
			parts.Hash(plan)
			if err := resumeRecv(ctx, ctl, plan, parts); err != nil {
				return fail(err)
			}
		}
		if err := deltaRecv(ctx, ctl, plan, deltas); err != nil {
			return fail(err)
		}
		window := tuning.ClampWindow(hello.Window)
		// A client that remembers its path sends data a round trip before its proof
		// (docs/PROTOCOL.md, "Data before the proof"), so the receiver starts now, its chunk size
		// fixed (Path.FixChunk), where ssh's client is another host. A client on this host may
		// propose jumbo chunks, which only the proof settles: there the receiver starts at the
		// proof (the data that came before it waits in the lanes, and on loopback the proof is
		// microseconds away); so may one that says its path carries large datagrams (--mtu), which
		// then starts without a remembered rate, after the handshake. The lanes must be proven
		// within 15 s either way.
		rctx, rcancel := context.WithCancelCause(ctx)
		defer rcancel(nil)
		if !sshClient.IsValid() || sshClient.IsLoopback() || hello.MTU >= session.JumboMTU {
			if err := path.WaitPeers(ctx, 15*time.Second); err != nil {
				return fail(err)
			}
		} else {
			go func() {
				if err := path.WaitPeers(rctx, 15*time.Second); err != nil && rctx.Err() == nil {
					rcancel(err)
				}
			}()
		}
		_, err = runRecv(rctx, ctl, path, so.Tuning, plan, target, so.Tuning.Writer(fcopy.WriterOptions{Sink: hello.Sink, Preserve: hello.Preserve,
			Records: !hello.NoResume, Resume: parts, Delta: deltas, CheckpointEvery: so.CheckpointEvery}), window, hello.AutoWindow, true, nil,
			deleter(hello.Delete && !hello.Sink, target, hello.Files, filter, nil))
		if cause := context.Cause(rctx); err != nil && errors.Is(cause, session.ErrNoUDP) {
			return cause // runRecv has sent it
		}
		return err
	case RoleSend:
		filter, err := fcopy.NewFilter(hello.Filter)
		if err == nil && hello.FilesFrom != nil {
			err = fcopy.CheckFilesFrom(hello.FilesFrom)
		}
		if err != nil {
			return fail(fmt.Errorf("%w: hello: %v", ErrProtocol, err))
		}
		var paths []string
		for _, p := range hello.Paths {
			// A pattern ("dir/*.bin") is expanded here, as scp's remote shell would, but with
			// Glob: no shell sees the client's words.
			ms, err := fcopy.Glob(expandHome(p))
			if err != nil {
				return fail(err)
			}
			paths = append(paths, ms...)
		}
		sources, err := fcopy.Collect(paths, fcopy.CollectOptions{Recursive: hello.Recursive, Follow: hello.Follow, HardLinks: hello.HardLinks,
			Filter: filter, FilesFrom: hello.FilesFrom})
		if err != nil {
			return fail(err)
		}
		if cmp == fcopy.Checksum {
			if err := sources.AddSums(); err != nil {
				return fail(err)
			}
		}
		plan, err := fcopy.NewPlan(sources.Files)
		if err != nil {
			return fail(err)
		}
		if err := checkListSize(sources.Files); err != nil {
			return fail(err)
		}
		path.SendTrainOnHello()
		files := Msg{T: KindFiles}
		if sources.Skipped != (fcopy.Skipped{}) {
			files.Skipped = &sources.Skipped
		}
		if err := sendFiles(ctl, files, sources.Files); err != nil {
			return fail(err)
		}
		acc, err := ctl.Expect(ctx, KindAccept, haveWithin(cmp, plan.TotalBytes()))
		if err != nil {
			return err
		}
		// The client is the receiver and says what it has; only files of this list, each once.
		if err := takeHave(plan, cmp, false, acc.Have); err != nil {
			return fail(err)
		}
		// And which files it can resume: their offered blocks are checked against the source now.
		if err := resumeSend(ctx, ctl, plan, sources.Open(), acc.Resume, hello.NoResume); err != nil {
			return fail(err)
		}
		// And which of its files in another version are to be compared block by block.
		if err := deltaSend(ctx, ctl, plan, sources.Open(), acc.Delta, hello.WholeFile, false); err != nil {
			return fail(err)
		}
		if err := path.WaitPeers(ctx, 15*time.Second); err != nil {
			return fail(err)
		}
		window := tuning.ClampWindow(acc.Window)
		pol, err := cc.ParsePolicy(hello.Policy)
		if err != nil {
			return fail(err)
		}
		var mode fec.Mode
		if hello.FEC != "" {
			if mode, err = fec.ParseMode(hello.FEC); err != nil {
				return fail(err)
			}
		}
		_, err = runSend(ctx, ctl, path, so.Tuning, plan, sources.Open(), session.SenderConfig{Rate: hello.Rate, MinRate: hello.MinRate,
			Policy: pol, Window: window, FEC: mode}, acc.AutoWindow, nil, nil)
		return err
	default:
		if role, ok := so.Roles[hello.Role]; ok {
			return role(ctx, &Served{Control: ctl, Path: path, Client: sshClient, Server: sshServer})
		}
		return fail(fmt.Errorf("unknown role %q", hello.Role))
	}
}

// expandHome resolves a leading "~/" and relative paths against the home directory, as scp does
// for remote paths.
func expandHome(p string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	switch {
	case p == "" || p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return home + p[1:]
	case !strings.HasPrefix(p, "/"):
		return home + "/" + p
	}
	return p
}

// dryRecv answers a --dry-run push: what this end has, and with --delete what it would delete
// (fcopy.Target.Delete, dry); nothing is written or removed.
func dryRecv(ctl *Control, hello Msg, target *fcopy.Target, have []int, filter *fcopy.Filter) error {
	m := Msg{T: KindHave, Have: have}
	if hello.Delete && target != nil {
		if _, err := target.Delete(hello.Files, filter, true, func(d fcopy.Deletion) { m.Deleting = append(m.Deleting, d.Name) }); err != nil {
			ctl.SendError(err)
			return err
		}
	}
	if err := fitDryAnswer(m); err != nil {
		ctl.SendError(err)
		return err
	}
	return ctl.Send(m)
}

// fitDryAnswer refuses an answer to a dry run larger than the client takes in one have line (at
// most maxMessage bytes and maxListEntries entries), which it would read as a protocol violation:
// a destination with that much to delete is told so in this end's words.
func fitDryAnswer(m Msg) error {
	line, err := json.Marshal(m)
	if err == nil && (len(m.Have)+len(m.Deleting) > maxListEntries || len(line)+1 > maxMessage) {
		err = fmt.Errorf("the destination has %d entries to delete, more than a dry run's answer can list (%d entries, %d MiB of names); narrow the copy, or run it without --dry-run",
			len(m.Deleting), maxListEntries, maxMessage>>20)
	}
	return err
}
