// Package xfer runs a transfer from both ends: the control-channel conversation over the ssh
// session's stdin/stdout, the UDP path, and the sending or receiving engine.
package xfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tcpbench"
)

// Proto is the control protocol version (docs/PROTOCOL.md). Both ends must speak the same one.
const Proto = 22

// Msg is one control message: a JSON object per line. Only the fields of its type are set.
type Msg struct {
	T       Kind   `json:"t"` // the message's kind (messages.go)
	Version string `json:"version,omitempty"`
	Proto   int    `json:"proto,omitempty"`

	// ready: the server's X25519 public key (see kex.go)
	Pub string `json:"pub,omitempty"`

	// hello
	Role      string   `json:"role,omitempty"` // the server's role: "recv" (push) or "send" (pull)
	Paths     []string `json:"paths,omitempty"`
	Dest      string   `json:"dest,omitempty"`
	Recursive bool     `json:"recursive,omitempty"`
	Follow    bool     `json:"follow,omitempty"`     // pull: -L, the remote follows symbolic links
	HardLinks bool     `json:"hard_links,omitempty"` // pull: -H, the remote sends hard links as such
	Preserve  bool     `json:"preserve,omitempty"`
	Sink      bool     `json:"sink,omitempty"`
	Debug     bool     `json:"debug,omitempty"`
	Profile   string   `json:"profile,omitempty"`    // the client's FARWING_CPUPROFILE; the server profiles only by its own environment's (Serve)
	Rate      float64  `json:"rate,omitempty"`       // ceiling, bits/s (0: none)
	MinRate   float64  `json:"min_rate,omitempty"`   // floor, bits/s
	Policy    string   `json:"policy,omitempty"`     // fair, high, fixed, low
	FEC       string   `json:"fec,omitempty"`        // off, auto or K+M (pull: the server sends)
	Compare   string   `json:"compare,omitempty"`    // what counts as already there: "" size and mtime, "checksum", "none" (fcopy.Compare)
	NoResume  bool     `json:"no_resume,omitempty"`  // --no-resume: no partial file is kept or resumed
	WholeFile bool     `json:"whole_file,omitempty"` // --whole-file: no file is compared block by block
	MTU       int      `json:"mtu,omitempty"`        // --mtu: from session.JumboMTU the client may propose large datagrams, which only the lanes' proof settles
	// pull: the filter rules (--exclude, --include, in order) and the --files-from list, which
	// the server applies to its Collect after checking them (fcopy.NewFilter, CheckFilesFrom);
	// push, with Delete: the rules, which protect what they exclude from deletion
	Filter    []fcopy.Rule `json:"filter,omitempty"`
	FilesFrom []string     `json:"files_from,omitempty"`
	// push: --delete, the server removes what the destination's directories of the list hold and
	// the list does not (the filter rules protect what they exclude), once every file is placed
	Delete bool `json:"delete,omitempty"`
	// push: --dry-run, the server answers the list with have (and Deleting) and stops
	DryRun bool `json:"dry_run,omitempty"`

	// ready
	Ports []int  `json:"ports,omitempty"`
	Addr  string `json:"addr,omitempty"`

	// hello (push) / files (pull): the number of entries of the file list, which follows in "list"
	// messages (list.go); Files is the list on this end (it never travels in these messages)
	Entries int          `json:"entries,omitempty"`
	Files   []fcopy.File `json:"-"`
	// list: a chunk of the file list, a DEFLATE-compressed JSON array of entries (base64)
	Z []byte `json:"z,omitempty"`

	// files (pull)
	Skipped    *fcopy.Skipped `json:"skipped,omitempty"` // files (pull): what the remote's Collect left out
	Window     int            `json:"window,omitempty"`
	AutoWindow bool           `json:"auto_window,omitempty"` // Window came from tuning.WindowBlocks, not --window
	// have (push, server → client) / accept (pull): the indexes of the regular files of the list
	// that the receiver already has, ascending; they are not sent (fcopy.Plan.Skip)
	Have []int `json:"have,omitempty"`
	// have / accept: the receiver's offers to resume files from the blocks an interrupted copy
	// left (fcopy.Offer); resumed (receiver → sender): the blocks kept of each, all or none
	Resume []fcopy.Offer `json:"resume,omitempty"`
	// have / accept: the receiver's offers to compare changed files block by block (fcopy.Offer:
	// the first blocks of each, which its old file holds whole)
	Delta []fcopy.Offer `json:"delta,omitempty"`
	// have (push, --dry-run with --delete): the entries the server would delete, as the list
	// would name them (its word, escaped before it is shown)
	Deleting []string `json:"deleting,omitempty"`
	// sums (sender → receiver): the block digests of an offer's blocks, 32 bytes each (base64);
	// hashes (receiver → sender): the same of a compared file's old blocks
	Digests []byte `json:"digests,omitempty"`
	// changed (sender → receiver): which of a compared file's offered blocks are sent, a bit each
	// (block k: bit k%8 of byte k/8), in base64
	Send []byte `json:"send,omitempty"`

	// digest
	File int    `json:"file,omitempty"`
	Sum  string `json:"sum,omitempty"`

	// done: the number of results, which come before it in "results" messages, sent as the
	// receiver places the files (list.go: chunks as the file list's, of fcopy.FileResult);
	// Results is the verdict on this end
	Results []fcopy.FileResult `json:"-"`
	Stats   *PeerStats         `json:"stats,omitempty"`

	// bench (hello role "bench"): the peer's host facts ("facts"), a TCP test asked for ("tcp"),
	// the listener for it ("listen": port and the token every stream sends first) and its outcome
	// ("tcp-done")
	Facts     *hostinfo.Facts  `json:"facts,omitempty"`
	TCPTest   *TCPTest         `json:"tcp_test,omitempty"`
	Port      int              `json:"port,omitempty"`  // also "streams": the server's TCP port for the streams
	Token     string           `json:"token,omitempty"` // also "streams": what each stream sends first
	TCPResult *tcpbench.Result `json:"tcp_result,omitempty"`
	Name      string           `json:"name,omitempty"` // "check": a file of the bench's directory (facts' dest)
	Size      int64            `json:"size,omitempty"` // "http": the HTTP row's file size

	// doctor (hello role "doctor"): the peer's lanes ("facts", "lanes") and its wall clock
	// ("clock": Unix nanoseconds)
	Doctor *DoctorLanes `json:"doctor,omitempty"`
	At     int64        `json:"at,omitempty"`
	Probe  *DoctorProbe `json:"probe,omitempty"` // "probe": the capacity probe's trains, and the server's arrivals

	// streams (a copy whose UDP handshake failed): the client asks for this many TCP streams, the
	// server answers with its Port, the local socket its ssh relays reach, Relay, and the Token
	// every stream sends first (streams.go)
	Streams int    `json:"streams,omitempty"`
	Relay   string `json:"relay,omitempty"`

	// error
	Err  string    `json:"err,omitempty"`
	Code ErrorCode `json:"code,omitempty"`
}

// PeerStats is what the remote end reports about its side of the data path.
type PeerStats struct {
	Datagrams     uint64     `json:"datagrams"`
	Retransmitted uint64     `json:"retransmitted,omitempty"`
	Lost          uint64     `json:"lost,omitempty"`
	LostByTime    uint64     `json:"lost_by_time,omitempty"` // of which by the time threshold (the rest: three or more later datagrams acknowledged)
	WireBytes     uint64     `json:"wire_bytes,omitempty"`
	AuthFailures  uint64     `json:"auth_failures"`
	Drops         *Drops     `json:"drops,omitempty"` // every datagram this end refused, by reason
	Seconds       float64    `json:"seconds"`
	MaxRSS        int64      `json:"max_rss_bytes,omitempty"` // the peak resident memory of the reporting process
	CPUSeconds    float64    `json:"cpu_seconds,omitempty"`   // its user and system CPU time so far
	CC            *RateStats `json:"cc,omitempty"`

	// FEC, sender side ("bye")
	Parity       uint64  `json:"parity,omitempty"`        // parity datagrams sent
	RepairParity uint64  `json:"repair_parity,omitempty"` // of which repairs
	Groups       uint64  `json:"groups,omitempty"`        // FEC groups sent
	RepairGroups uint64  `json:"repair_groups,omitempty"` // groups that needed a repair round trip
	TailSeconds  float64 `json:"tail_seconds,omitempty"`  // last new data datagram to the verdict
	ProbeBps     float64 `json:"probe_bps,omitempty"`     // packet-train estimate the sender's STARTUP was seeded with
	// FEC, receiver side ("done")
	FECRebuilt  uint64 `json:"fec_rebuilt,omitempty"`   // groups rebuilt from the parity sent with them
	FECRepaired uint64 `json:"fec_repaired,omitempty"`  // groups rebuilt with repair parity
	FECChunks   uint64 `json:"fec_chunks,omitempty"`    // chunks rebuilt
	Duplicates  uint64 `json:"duplicates,omitempty"`    // data datagrams that brought nothing new (receiver)
	Held        uint64 `json:"feedback_held,omitempty"` // times feedback waited for a stalled lane (receiver)

	Lanes []LaneReport `json:"lanes,omitempty"` // this end's lane counters, lane by lane

	// What held the sender ("bye"): seconds waiting on the receive window, on the source.
	WindowSeconds float64 `json:"window_seconds,omitempty"`
	SourceSeconds float64 `json:"source_seconds,omitempty"`
	Cores         int     `json:"cores,omitempty"` // the reporting end's CPUs

	// What --delete removed at the receiver ("done"), after every file was placed.
	Deleted int `json:"deleted,omitempty"`
}

// Drops counts the datagrams one end refused, by reason: a flood of forged or replayed datagrams
// shows here, at the end it hit.
type Drops struct {
	Foreign      uint64 `json:"foreign"`       // not this session's: too short, not Farwing's, another connection id or lane
	AuthFailures uint64 `json:"auth_failures"` // this session's by their header, but failed authentication
	Replays      uint64 `json:"replays"`       // authentic, but seen before
	Invalid      uint64 `json:"invalid"`       // authentic, but out of bounds: a block, chunk, length or FEC field no honest peer sends, malformed feedback
	Early        uint64 `json:"early"`         // authentic, arrived before the engine and beyond what is held for it
}

func pathDrops(p *session.Path, invalid uint64) Drops {
	return Drops{Foreign: p.Foreign.Load(), AuthFailures: p.AuthFailures.Load(), Replays: p.Replays.Load(), Invalid: invalid + p.ControlInvalid.Load(), Early: p.EarlyDropped.Load()}
}

// LaneReport is one lane's socket counters at one end, as printed in --json.
type LaneReport struct {
	Sent      uint64 `json:"sent"`       // datagrams
	Received  uint64 `json:"received"`   // datagrams
	RxDropped uint64 `json:"rx_dropped"` // receive-buffer overflows the kernel counted (SO_RXQ_OVFL); with GRO one can be a coalesced super-packet of up to ~44 datagrams
	Late      uint64 `json:"late"`       // datagrams that arrived after a later one of the lane (reordered on the way)
}

// RateStats is the rate controller's summary, as printed in --json.
type RateStats struct {
	RateBps          float64 `json:"rate_bps"`  // pacing rate at the end
	BtlBwBps         float64 `json:"btlbw_bps"` // estimated bottleneck bandwidth
	SRTTms           float64 `json:"srtt_ms"`
	MinRTTms         float64 `json:"min_rtt_ms"`
	RandomLoss       float64 `json:"random_loss"` // measured random-loss rate (fraction): loss of congestion-free rounds
	LossBase         float64 `json:"loss_base"`   // the same from low-rate rounds only (the controller's baseline)
	CongestionEvents uint64  `json:"congestion_events"`
	QueueEvents      uint64  `json:"queue_events,omitempty"` // of them, events on a growing queue (rising delay), not on loss
	SharedEvents     uint64  `json:"shared_events"`          // times the fair-share cap went on (a loss-based flow filled the queue)
	SpuriousLosses   uint64  `json:"spurious_losses"`        // datagrams declared lost that were acknowledged afterwards
	ProbeRTTs        uint64  `json:"probe_rtts"`             // times the controller drained to half a BDP to re-take the minimum RTT
	Mode             string  `json:"mode"`
	// Verdicts is the evidence of the latest congestion events (at most four, oldest first).
	Verdicts []Verdict `json:"verdicts,omitempty"`
}

// Verdict is one congestion event as the controller judged it (cc.Verdict).
type Verdict struct {
	AtSeconds float64 `json:"at_s"`   // since the sender started
	Reason    string  `json:"reason"` // loss-excess, loss-burst, loss-at-queue, loss-hard or queue
	State     string  `json:"state"`  // the controller's mode/phase then
	Acked     int     `json:"acked"`  // the round's datagrams acknowledged and lost
	Lost      int     `json:"lost"`
	MaxRun    int     `json:"max_run"` // longest run of losses on one lane
	LostHiQ   int     `json:"lost_at_queue"`
	AckedHiQ  int     `json:"acked_at_queue"`
	LossBase  float64 `json:"loss_base"`
	QueueMS   float64 `json:"queue_ms"`
	DeepCut   bool    `json:"deep_cut"` // judged an overflowing queue
}

// verdictReasons are the reasons a Verdict may give; checkVerdicts keeps a peer to them.
var verdictReasons = map[string]bool{"loss-excess": true, "loss-burst": true, "loss-at-queue": true, "loss-hard": true, "queue": true}

// checkVerdicts bounds the verdicts a peer reported (on a pull they are its word): at most four,
// reasons from the known set, state names clipped to what a mode/phase name can be.
func checkVerdicts(vs []Verdict) []Verdict {
	if len(vs) > 4 {
		vs = vs[len(vs)-4:]
	}
	for i := range vs {
		if !verdictReasons[vs[i].Reason] {
			vs[i].Reason = "unknown"
		}
		st := escape.Text(hostinfo.Clip(vs[i].State))
		if len(st) > 24 {
			st = strings.ToValidUTF8(st[:24], "") // no rune cut in two
		}
		vs[i].State = st
	}
	return vs
}

// Control is one end of the control channel. Messages are JSON objects, one per line (Send never
// writes a newline inside one); a line longer than maxMessage, or than its type may take
// (checkLine), ends the channel, so that a peer cannot make this end hold an unbounded message in
// memory, as a line or decoded.
//
// Messages are numbered from 0 in the order each end sends them. Once the lanes are up, the end
// that receives data copies what it sends onto them as well (Mirror, session.Path.SendControl),
// and the other end takes each message from whichever copy comes first (Offer): the copies skip a
// TCP retransmission of ssh's connection, the control channel keeps the order and stays the
// authority (a copy it contradicts ends the session).
type Control struct {
	mu     sync.Mutex
	w      io.Writer
	r      *bufio.Reader
	sent   uint32                              // messages sent
	mirror func(seq uint32, line []byte) error // copies what Send sends (nil: nothing)
	// channelOnly: Mirror does nothing (Options.ChannelOnly)
	channelOnly bool

	in     chan inMsg
	copies chan ctlCopy // messages copied on the lanes (Offer), for the reading goroutine
	queued atomic.Int64 // bytes of the messages read but not yet taken
	err    error        // why the channel ended; read after in is closed
	gone   func(error) error
	// Copied counts the messages taken from a copy on the lanes before the control channel
	// brought them.
	Copied atomic.Uint64
	// aside takes the messages of one kind as they come, instead of Next (Aside).
	aside atomic.Pointer[asideFunc]
}

// asideFunc is what Aside registered: the kind and the function that takes it.
type asideFunc struct {
	t Kind
	f func(Msg)
}

// Aside hands every message of kind t to f as it comes, in its order among the others, instead
// of to Next: a request that may come while this end waits on another message (a fallback to TCP
// streams, streams.go). f runs on the reading goroutine and must not block. One kind at a time.
func (c *Control) Aside(t Kind, f func(Msg)) { c.aside.Store(&asideFunc{t, f}) }

// ctlCopy is a control message copied on the lanes: its number and its line.
type ctlCopy struct {
	seq  uint32
	line []byte
}

// maxAhead bounds the copies taken or held ahead of the control channel (each is at most
// session.MaxControlMessage).
const maxAhead = 64

// maxMessage bounds one control message: the file list and the verdict travel in chunks of at
// most maxChunkWire (list.go); a have of 4,000,000 files or the sums of a resumed 1 TiB file fit.
// maxQueued bounds the messages read but not yet taken, together: a peer that sends while this
// end is busy (a TCP test of minutes) cannot make it hold more.
const (
	maxMessage = 64 << 20
	maxQueued  = 2 * maxMessage
)

// A control line is bounded by its message's type before it is decoded (checkLine), so that
// what a line decodes to stays within some 64 MiB whatever the peer puts in it: every type may
// take smallLine of JSON text besides its bulk fields, which are the only ones that may be long
// (messages.go; a hostile "ready" of 63 MiB of "{}" in its rate controller's verdicts decoded to
// 2.2 GiB). Each bound is the longest honest message of the type, escapes included:
//
//   - hello: a pull's paths, which come from one command line (at most 6 MiB of arguments on Linux,
//     three quarters of the 8 MiB stack limit, each argument costing a pointer of 8 bytes too: at
//     most 571,950 of them), each byte at most 6 of JSON (\u00XX, \ufffd): maxHelloLine, and at most
//     maxHelloPaths paths.
//   - list, results: a chunk, maxChunkWire (list.go).
//   - have, accept: the indexes of at most maxListEntries files (8 bytes each in JSON), offers to
//     resume and to compare (some 34 bytes each), of disjoint files: together at most
//     maxListEntries entries, in a line of at most maxMessage; resumed: one entry per offer, the same.
//   - sums, hashes: the digests of fcopy.MaxOfferBlocks blocks, 32 bytes each, in base64:
//     maxSumsLine; changed: a bit for each of them, in base64: maxChangedLine.
//   - error: a line of text that names at most a few paths (a destination from a command line, of
//     at most 128 KiB, MAX_ARG_STRLEN, and a name of 4096 bytes, each byte at most 6 of JSON):
//     maxErrorLine.
//   - every other type: smallLine in all (the longest, files, carries two example paths of at most
//     4096 bytes: at most 49 KiB).
//
// What the bulk fields decode to is bounded by their length and counts: a path is a string (16
// bytes) and its text; an index or an offer 8 or 16 bytes; a chunk, the digests and an error's
// text are at most their JSON text. Decoded memory of messages not yet taken is counted too
// (heldBytes), so many short lines cannot add up either.
const (
	smallLine      = 64 << 10
	maxHelloLine   = 40 << 20
	maxHelloPaths  = 1 << 20
	maxSumsLine    = (fcopy.MaxOfferBlocks*32+2)/3*4 + smallLine
	maxChangedLine = (fcopy.MaxOfferBlocks/8+2)/3*4 + smallLine
	maxErrorLine   = 4 << 20
)

// The bulk fields: the only members of a message that may take more than smallLine.
const (
	bulkPaths = 1 << iota
	bulkHave
	bulkResume
	bulkDigests
	bulkZ
	bulkErr
	bulkDelta
	bulkSend
	bulkFilter
	bulkFilesFrom
	bulkDeleting
)

// bulkNames are the bulk fields' JSON names, in the order of their bits.
var bulkNames = [...]string{"paths", "have", "resume", "digests", "z", "err", "delta", "send", "filter", "files_from", "deleting"}

// lineRule is what a line of one message type may take: limit bytes in all, and its bulk fields.
type lineRule struct {
	limit int
	bulk  int
}

// lineRuleOf is the rule of a message type whose lines may take more than smallLine (messages).
func lineRuleOf(t Kind) (lineRule, bool) {
	r := messages[t].line
	return r, r.limit != 0
}

// lineShape is what checkLine's scan of a line found: the type, and for each bulk field the bytes
// its members take (key and value) and the elements of its arrays, over all its members (a key may
// be given twice).
type lineShape struct {
	t     Kind
	hasT  bool // a "t" member whose value is a string was found
	longT bool // ... and it is longer than any type
	bytes [len(bulkNames)]int
	elems [len(bulkNames)]int
}

// count is the elements of the arrays of the bulk field b (one of the bulk constants).
func (sh *lineShape) count(b int) int { return sh.elems[bits.TrailingZeros(uint(b))] }

// checkLine bounds a line by its message's type, before it is decoded: the line, the members
// other than the type's bulk fields, and the elements of those (lineRuleOf). It returns the type it
// read, which the decoded message must have too: encoding/json takes the last of two "t" members.
// Errors are protocol violations; a line that is not JSON is left to json.Unmarshal to say so, as
// long as it is no longer than smallLine.
func checkLine(line []byte) (Kind, error) {
	var sh lineShape
	ok := scanLine(line, &sh)
	if sh.longT {
		return "", fmt.Errorf("%w: control channel: malformed message: a type of more than %d bytes", ErrProtocol, maxTypeText)
	}
	rule, known := lineRuleOf(sh.t)
	if !ok || !known {
		rule = lineRule{smallLine, 0}
	}
	if len(line) > rule.limit {
		if w := messages[sh.t].chunk; w != "" {
			return "", fmt.Errorf("%w: control channel: a %s chunk of %d bytes, more than %d", ErrProtocol, w, len(line), rule.limit)
		}
		return "", fmt.Errorf("%w: control channel: a %s message of %d bytes, more than the %d it may take", ErrProtocol, escape.Quote(string(sh.t)), len(line), rule.limit)
	}
	if !ok {
		return sh.t, nil // not JSON: json.Unmarshal says why
	}
	rest := len(line)
	for i := range bulkNames {
		if rule.bulk&(1<<i) != 0 {
			rest -= sh.bytes[i]
		}
	}
	if rest > smallLine {
		var names []string
		for i, name := range bulkNames {
			if rule.bulk&(1<<i) != 0 {
				names = append(names, name)
			}
		}
		return "", fmt.Errorf("%w: control channel: a %s message whose fields other than %s take %d bytes, more than %d",
			ErrProtocol, escape.Quote(string(sh.t)), andList(names), rest, smallLine)
	}
	if n := sh.count(bulkHave) + sh.count(bulkResume) + sh.count(bulkDelta) + sh.count(bulkDeleting); rule.bulk&(bulkHave|bulkResume|bulkDelta|bulkDeleting) != 0 && n > maxListEntries {
		return "", fmt.Errorf("%w: control channel: a %s message of %d entries, more than the %d files of a list", ErrProtocol, escape.Quote(string(sh.t)), n, maxListEntries)
	}
	if n := sh.count(bulkPaths); rule.bulk&bulkPaths != 0 && n > maxHelloPaths {
		return "", fmt.Errorf("%w: control channel: a %s message of %d paths, more than %d", ErrProtocol, escape.Quote(string(sh.t)), n, maxHelloPaths)
	}
	if n := sh.count(bulkFilter); rule.bulk&bulkFilter != 0 && n > fcopy.MaxRules {
		return "", fmt.Errorf("%w: control channel: a %s message of %d filter rules, more than %d", ErrProtocol, escape.Quote(string(sh.t)), n, fcopy.MaxRules)
	}
	if n := sh.count(bulkFilesFrom); rule.bulk&bulkFilesFrom != 0 && n > fcopy.MaxFilesFrom {
		return "", fmt.Errorf("%w: control channel: a %s message of %d --files-from paths, more than %d", ErrProtocol, escape.Quote(string(sh.t)), n, fcopy.MaxFilesFrom)
	}
	return sh.t, nil
}

// andList names the items of names as a sentence does: "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// maxTypeText bounds the text of a message's type ("t"), escapes included.
const maxTypeText = 64

// scanLine reads the members of the JSON object line holds, without decoding their values, into
// sh: the type (the first member whose key encoding/json matches to "t": any case, escapes
// decoded; "" where there is none), and what each bulk field takes. It returns false where line
// is not an object it can read (then json.Unmarshal will not either: the scan follows JSON's
// grammar, FuzzControl checks that it reads every object json.Valid accepts).
func scanLine(line []byte, sh *lineShape) bool {
	i := skipSpace(line, 0)
	if i == len(line) || line[i] != '{' {
		return false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return skipSpace(line, i+1) == len(line)
	}
	for {
		if i == len(line) || line[i] != '"' {
			return false
		}
		start := i
		end := stringEnd(line, i)
		if end < 0 {
			return false
		}
		key := keyName(line[i:end])
		i = skipSpace(line, end)
		if i == len(line) || line[i] != ':' {
			return false
		}
		i = skipSpace(line, i+1)
		var elems int
		vend := -1
		switch {
		case strings.EqualFold(key, "t") && !sh.hasT && i < len(line) && line[i] == '"':
			vend = stringEnd(line, i)
			if vend < 0 {
				return false
			}
			sh.hasT = true
			if vend-i > maxTypeText {
				sh.longT = true
			} else if json.Unmarshal(line[i:vend], &sh.t) != nil {
				return false
			}
		default:
			vend, elems = valueEnd(line, i)
		}
		if vend < 0 {
			return false
		}
		for b, name := range bulkNames {
			if strings.EqualFold(key, name) {
				sh.bytes[b] += vend - start
				sh.elems[b] += elems
			}
		}
		i = skipSpace(line, vend)
		if i == len(line) {
			return false
		}
		switch line[i] {
		case ',':
			i = skipSpace(line, i+1)
		case '}':
			return skipSpace(line, i+1) == len(line)
		default:
			return false
		}
	}
}

// keyName is a member's key as encoding/json matches it to a field (escapes decoded); a key too
// long to be any field's name is "".
func keyName(quoted []byte) string {
	if len(quoted) > maxTypeText {
		return ""
	}
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var k string
	if json.Unmarshal(quoted, &k) != nil {
		return ""
	}
	return k
}

// skipSpace returns the index of the first byte at or after i that is not JSON's white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just after the JSON string that starts at b[i] (a quote), or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		bs := 0 // a quote after an odd run of backslashes is escaped
		for bs < j-i-1 && b[j-1-bs] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			return j + 1
		}
		j++
	}
}

// valueEnd returns the index just after the JSON value that starts at b[i], or -1, and, for an
// array, its elements.
func valueEnd(b []byte, i int) (end, elems int) {
	if i == len(b) {
		return -1, 0
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i), 0
	case '{', '[':
		array := b[i] == '['
		if array {
			if j := skipSpace(b, i+1); j < len(b) && b[j] != ']' {
				elems = 1
			}
		}
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1, 0
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, elems
				}
			case ',':
				if array && depth == 1 {
					elems++
				}
			}
		}
		return -1, 0
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	if j == i {
		return -1, 0
	}
	return j, 0
}

// inMsg is a message read, with what it counts in Control.queued: its size on the wire, or what
// it holds decoded where that is more.
type inMsg struct {
	m Msg
	n int64
}

// NewControl wraps a reader and writer (the ssh pipes, or stdin/stdout in serve). gone, if not
// nil, turns the error that ended the channel into the one reported (the client asks ssh how it
// ended).
func NewControl(r io.Reader, w io.Writer, gone func(error) error) *Control {
	return &Control{w: w, r: bufio.NewReaderSize(r, 64<<10), in: make(chan inMsg, 1024), copies: make(chan ctlCopy, maxAhead), gone: gone}
}

// Start reads messages in the background until the channel ends, and then calls ended at once
// with the reason (the session ends with its control channel, even while no one waits on a
// message). Call it once, before Next.
func (c *Control) Start(ended func(error)) {
	lines := make(chan lineRead)
	merged := make(chan struct{}) // merge has ended
	go func() {
		for {
			line, err := c.read()
			if err == nil { // a message counts as queued from when it is read
				err = c.queue(int64(len(line)))
			}
			select {
			case lines <- lineRead{line, err}:
			case <-merged:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		c.merge(lines, ended)
		close(merged)
	}()
}

// lineRead is a line the control channel brought, or why it ended.
type lineRead struct {
	line []byte
	err  error
}

// merge delivers the messages in order, each from the control channel or from a copy on the
// lanes, whichever comes first, until the channel ends.
func (c *Control) merge(lines <-chan lineRead, ended func(error)) {
	// The next message to deliver and the messages the channel brought, counted in 64 bits (a
	// copy's number is their low 32: it is placed next to next, see at).
	var next, got uint64
	held := map[uint64][]byte{}   // copies that came ahead of a message not yet delivered
	copied := map[uint64][]byte{} // copies delivered, until the channel brings the message too
	// The channel's latest lines short enough to have copies, by number: a copy that comes after
	// its message must be that message too (so both ends count alike, whichever comes first).
	var recent [maxAhead]struct {
		seq  uint64
		line []byte
	}
	differs := func(seq uint64) error {
		return fmt.Errorf("%w: control channel: message %d differs from its copy on the lanes", ErrProtocol, seq)
	}
	// remote is the error the peer reported last: a peer that reports an error and leaves may be
	// seen leaving first by whoever waits on the session, and its word ends the session (ended),
	// not "gone"; Next still returns each message, then the channel's end.
	var remote error
	// deliver parses line and queues it for Next; counted: its bytes are in queued already.
	// A message counts as what it holds decoded where that is more than its line (heldBytes).
	deliver := func(line []byte, counted bool) error {
		m, n, err := parse(line)
		if err == nil && m.T == KindError {
			remote = remoteError(m)
		}
		if a := c.aside.Load(); err == nil && a != nil && m.T == a.t {
			next++
			if counted {
				c.queued.Add(-n)
			}
			a.f(m)
			return nil
		}
		size := n
		if err == nil {
			size = max(n, msgSize+heldBytes(reflect.ValueOf(&m).Elem()))
			if counted {
				err = c.queue(size - n)
			} else {
				err = c.queue(size)
			}
		}
		if err == nil {
			next++
			c.in <- inMsg{m, size}
		}
		return err
	}
	var err error
	for err == nil {
		select {
		case l := <-lines:
			if err = l.err; err != nil {
				break
			}
			seq := got
			got++
			if seq < next {
				// Its copy came first: the two must be the same message.
				c.queued.Add(-int64(len(l.line)))
				if cp, ok := copied[seq]; ok && !bytes.Equal(cp, l.line) {
					err = differs(seq)
				}
				delete(copied, seq)
				continue
			}
			if len(l.line) <= session.MaxControlMessage {
				r := &recent[seq%maxAhead]
				r.seq, r.line = seq, l.line
			}
			err = deliver(l.line, true)
		case cp := <-c.copies:
			seq := copyNumber(next, cp.seq)
			if r := &recent[seq%maxAhead]; seq < next && r.line != nil && r.seq == seq && !bytes.Equal(r.line, cp.line) {
				err = differs(seq)
			}
			if seq >= next && seq-next < maxAhead && len(held)+len(copied) < maxAhead && len(cp.line) > 0 && cp.line[len(cp.line)-1] == '\n' {
				held[seq] = cp.line
			}
		}
		for err == nil {
			line, ok := held[next]
			if !ok {
				break
			}
			delete(held, next)
			copied[next] = line
			c.Copied.Add(1)
			err = deliver(line, false)
		}
	}
	left := errors.Is(err, ErrPeerGone)
	if c.gone != nil {
		err = c.gone(err)
	}
	c.err = err
	close(c.in)
	switch {
	case ended == nil:
	case left && remote != nil:
		ended(remote) // the peer said why it left: that ends the session, not "gone"
	default:
		ended(err)
	}
}

// queue counts n more bytes of messages read and not yet taken, and refuses them beyond
// maxQueued: a peer that sends while this end is busy cannot make it hold more.
func (c *Control) queue(n int64) error {
	if c.queued.Add(n) > maxQueued {
		return fmt.Errorf("%w: control channel: more than %d MiB of messages sent unasked", ErrProtocol, maxQueued>>20)
	}
	return nil
}

// msgSize is a decoded message's own size.
var msgSize = int64(reflect.TypeFor[Msg]().Size())

// heldBytes is what the decoded value v holds beyond its own size: the bytes of its strings, the
// arrays of its slices and what its pointers, maps and interfaces lead to. A line of 64 KiB of
// "{}" in a list of structs holds some 40 times its length.
func heldBytes(v reflect.Value) int64 {
	if !holds(v.Type()) {
		return 0
	}
	var n int64
	switch v.Kind() {
	case reflect.String:
		n = int64(v.Len())
	case reflect.Slice:
		n = int64(v.Cap()) * int64(v.Type().Elem().Size())
		if holds(v.Type().Elem()) {
			for i := range v.Len() {
				n += heldBytes(v.Index(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			n += heldBytes(v.Index(i))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			n = int64(e.Type().Size()) + heldBytes(e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			n += heldBytes(v.Field(i))
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			n += int64(v.Type().Key().Size()+v.Type().Elem().Size()) + heldBytes(it.Key()) + heldBytes(it.Value())
		}
	}
	return n
}

// holds says whether a value of type t can hold memory beyond its own size (heldBytes).
func holds(t reflect.Type) bool {
	if h, ok := holdsType.Load(t); ok {
		return h.(bool)
	}
	h := false
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Map, reflect.Chan, reflect.Func:
		h = true
	case reflect.Array:
		h = t.Len() > 0 && holds(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			h = h || holds(t.Field(i).Type)
		}
	}
	holdsType.Store(t, h)
	return h
}

var holdsType sync.Map // reflect.Type → bool

// copyNumber is the message number whose low 32 bits are seq (Send numbers its copies modulo
// 2^32) nearest to next; one that would come before the first message is beyond any window.
func copyNumber(next uint64, seq uint32) uint64 {
	n := int64(next) + int64(int32(seq-uint32(next)))
	if n < 0 {
		return math.MaxUint64
	}
	return uint64(n)
}

// Offer hands this end a copy of message seq that came on the lanes (line: the message and its
// newline, as Send wrote it); a copy of a message delivered already, or too far ahead, is
// dropped. It never blocks (session.Path.OnControl): where copies pile up, the control channel
// brings the messages.
func (c *Control) Offer(seq uint32, line []byte) {
	select {
	case c.copies <- ctlCopy{seq, line}:
	default:
	}
}

// Mirror makes Send copy every message it sends from now on with f as well, under its number (nil:
// no more copies). f's errors are not Send's: the control channel carries the message anyway.
func (c *Control) Mirror(f func(seq uint32, line []byte) error) {
	if c.channelOnly {
		return
	}
	c.mu.Lock()
	c.mirror = f
	c.mu.Unlock()
}

// read reads one line, with its newline.
func (c *Control) read() ([]byte, error) {
	var line []byte
	for {
		frag, err := c.r.ReadSlice('\n')
		if len(line)+len(frag) > maxMessage {
			return nil, fmt.Errorf("%w: control channel: a message of more than %d MiB", ErrProtocol, maxMessage>>20)
		}
		if len(frag) > cap(line)-len(line) { // double: a long line costs a few times its length, not tens
			line = slices.Grow(line, max(len(frag), len(line)))
		}
		line = append(line, frag...)
		if err == nil {
			return line, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) {
			return nil, ErrPeerGone
		}
		return nil, fmt.Errorf("control channel: %w", err)
	}
}

// parse decodes one line and returns its length. The line is bounded by its message's type
// before it is decoded (checkLine): a line of a few MiB of "{}" or "0" would otherwise decode to
// tens of times its length (a verdict of the rate controller is some 120 bytes).
func parse(line []byte) (Msg, int64, error) {
	t, err := checkLine(line)
	if err != nil {
		return Msg{}, 0, err
	}
	var m Msg
	if err := json.Unmarshal(line, &m); err != nil {
		return Msg{}, 0, fmt.Errorf("%w: control channel: malformed message: %v", ErrProtocol, err)
	}
	if m.T != t { // "t" twice (encoding/json takes the last), or as null first
		return Msg{}, 0, fmt.Errorf("%w: control channel: malformed message: its type is given more than once", ErrProtocol)
	}
	return m, int64(len(line)), nil
}

// SendError tells the other end that this one stops because of err: an error message with err's
// text and its code (CodeOf), what the other end reports and exits with.
func (c *Control) SendError(err error) error {
	return c.Send(Msg{T: KindError, Err: err.Error(), Code: CodeOf(err)})
}

// Send writes one message; safe for concurrent use.
func (c *Control) Send(m Msg) error {
	line, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("control channel: %w", err)
	}
	line = append(line, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := c.sent
	c.sent++
	if c.mirror != nil {
		c.mirror(seq, line) // first: the copy does not wait for ssh's pipe
	}
	if _, err := c.w.Write(line); err != nil {
		return fmt.Errorf("control channel: %w", err)
	}
	if f, ok := c.w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// ErrProtocol marks a peer that broke the control protocol: a malformed or oversized message, one
// of the wrong type, a field out of bounds.
var ErrProtocol = errors.New("protocol violation")

// ErrPeerGone is returned when the control channel closes unexpectedly.
var ErrPeerGone = errors.New("the remote peer closed the control channel")

// Next returns the next message, waiting at most within (0: until ctx ends). A remote "error"
// message is returned as a *RemoteError.
func (c *Control) Next(ctx context.Context, within time.Duration) (Msg, error) {
	var timeout <-chan time.Time
	if within > 0 {
		t := time.NewTimer(within)
		defer t.Stop()
		timeout = t.C
	}
	var in inMsg
	var ok bool
	// A message read before the channel ended comes first: a peer that reports an error and
	// leaves ends the session's context too (Start), and its error must win over "gone".
	select {
	case in, ok = <-c.in:
	default:
		select {
		case in, ok = <-c.in:
		case <-ctx.Done():
			select { // a message that came with the end still comes first
			case in, ok = <-c.in:
			default:
				return Msg{}, context.Cause(ctx)
			}
		case <-timeout:
			return Msg{}, fmt.Errorf("%w: no control message for %s", session.ErrSilent, within)
		}
	}
	if !ok {
		return Msg{}, c.err
	}
	c.queued.Add(-in.n)
	m := in.m
	if m.T == KindError {
		return m, remoteError(m)
	}
	return m, nil
}

// Expect is Next that also checks the message's type.
func (c *Control) Expect(ctx context.Context, t Kind, within time.Duration) (Msg, error) {
	m, err := c.Next(ctx, within)
	if err != nil {
		return m, err
	}
	if m.T != t {
		return m, fmt.Errorf("%w: control channel: got %s, expected %q", ErrProtocol, escape.Quote(string(m.T)), t)
	}
	return m, nil
}

// RemoteError is an error reported by the other end. Its text is escaped (it may come from a
// hostile peer and is printed on a terminal), and its code is one of the protocol's.
type RemoteError struct {
	Msg  string
	Code ErrorCode // the code the other end sent (CodeFail for one the protocol has not)
}

func (e *RemoteError) Error() string { return e.Msg }

// remoteError makes the error message m reports safe to print and to exit with.
func remoteError(m Msg) *RemoteError {
	msg := m.Err
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	code := CodeFail
	switch m.Code {
	case CodeSource, CodeDest, CodeSSH, CodeUDP, CodeVerify, CodePlatform, CodeInstall, CodeProtocol:
		code = m.Code
	}
	return &RemoteError{Msg: "remote: " + escape.Text(msg), Code: code}
}

// digests collects the sender's whole-file digests as they arrive over the control channel.
type digests struct {
	mu   sync.Mutex
	cond *sync.Cond
	got  map[int][32]byte
	err  error
}

func newDigests() *digests {
	d := &digests{got: map[int][32]byte{}}
	d.cond = sync.NewCond(&d.mu)
	return d
}

func (d *digests) put(i int, sum [32]byte) {
	d.mu.Lock()
	d.got[i] = sum
	d.mu.Unlock()
	d.cond.Broadcast()
}

// take records the digest message m, checked against the plan: a file of the plan, a regular one
// that is sent (not one the receiver already has), 32 bytes in hex, and only once.
func (d *digests) take(plan *fcopy.Plan, m Msg) error {
	b, err := hex.DecodeString(m.Sum)
	if err != nil || len(b) != 32 || m.File < 0 || m.File >= len(plan.Files) || !plan.Files[m.File].Regular() || plan.Skipped(m.File) {
		return fmt.Errorf("%w: control channel: a malformed digest (file %d, %s)", ErrProtocol, m.File, escape.Quote(m.Sum))
	}
	d.mu.Lock()
	_, dup := d.got[m.File]
	d.mu.Unlock()
	if dup {
		return fmt.Errorf("%w: control channel: a second digest for file %d", ErrProtocol, m.File)
	}
	d.put(m.File, [32]byte(b))
	return nil
}

func (d *digests) fail(err error) {
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
	d.cond.Broadcast()
}

// digestWait bounds the wait for a file's digest once the receiver has all of the file's data
// (wait). The sender sends the digest as soon as it has read the file, before the file's last
// block leaves it: it is due by the time the data is in, so a sender that sends data and pings
// but never the digest is given up on as silent, as one that stops half way through a list.
const digestWait = PeerIdle

// wait returns the digest of file i, which the receiver has all the data of: at once if it came,
// or when it comes, within digestWait; or why it cannot come.
func (d *digests) wait(i int) ([32]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	late := false
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if s, ok := d.got[i]; ok {
			return s, nil
		}
		if d.err != nil {
			return [32]byte{}, d.err
		}
		if late {
			return [32]byte{}, fmt.Errorf("%w: the sender's digest of file %d did not come within %s of its data", session.ErrSilent, i, digestWait)
		}
		if t == nil {
			t = time.AfterFunc(digestWait, func() {
				d.mu.Lock()
				late = true
				d.mu.Unlock()
				d.cond.Broadcast()
			})
		}
		d.cond.Wait()
	}
}
