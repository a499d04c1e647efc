package xfer

import "encoding/hex"

// The control protocol's messages (docs/PROTOCOL.md): every kind, who may send it and in which
// roles, and how long its line may be (checkLine). A message is one Msg, its kind in T.

// Kind is a control message's type: its "t" member.
type Kind string

// The hello's roles: what the client asks the server to be.
const (
	RoleRecv   = "recv"   // a push: the server receives the files
	RoleSend   = "send"   // a pull: the server sends them
	RoleBench  = "bench"  // farwing bench's peer (internal/benchpeer)
	RoleDoctor = "doctor" // farwing doctor's peer (internal/doctorpeer)
)

// The kinds of message. In a copy the sender and the receiver are the data's: the client on a
// push, the server on a pull, and the other way round.
const (
	// Every role.
	KindReady Kind = "ready" // server, first: its version, key, UDP ports and address
	KindHello Kind = "hello" // client, first: the role and its settings
	KindError Kind = "error" // either: why it stops (ErrorCode)
	KindBye   Kind = "bye"   // a copy's sender after done, with its figures; the bench's and the doctor's client, to end

	// A copy (roles recv and send).
	KindList    Kind = "list"    // the sender: a chunk of the file list (list.go)
	KindFiles   Kind = "files"   // server, pull: the number of entries of its list
	KindHave    Kind = "have"    // server, push: the files it has, its offers to resume
	KindAccept  Kind = "accept"  // client, pull: the window, the files it has, its offers to resume
	KindSums    Kind = "sums"    // the sender: the digests of an offer's blocks
	KindResumed Kind = "resumed" // the receiver: the blocks of each offer it keeps
	KindHashes  Kind = "hashes"  // the receiver: the digests of a changed file's old blocks
	KindChanged Kind = "changed" // the sender: which of them it sends
	KindDigest  Kind = "digest"  // the sender: a file's whole digest
	KindResults Kind = "results" // the receiver: a chunk of the verdict on the files placed
	KindDone    Kind = "done"    // the receiver: every file placed, with its figures
	KindStreams Kind = "streams" // client: no UDP got through, carry the lanes on TCP streams; server: the port to connect to

	// The bench (role bench) and the doctor (role doctor).
	KindFacts       Kind = "facts"        // bench: the client asks, the server answers with its host's facts (first unasked); doctor: the server, first
	KindTCP         Kind = "tcp"          // bench, client: a TCP test
	KindListen      Kind = "listen"       // bench, server: the listener of a TCP test or of the HTTP row
	KindTCPDone     Kind = "tcp-done"     // bench, server: a TCP test's outcome
	KindCheck       Kind = "check"        // bench, client: hash and remove a file of the bench's directory
	KindChecked     Kind = "checked"      // bench, server: its digest
	KindHTTP        Kind = "http"         // bench, client: serve the HTTP row's file
	KindHTTPStop    Kind = "http-stop"    // bench, client: stop the HTTP row's server
	KindHTTPStopped Kind = "http-stopped" // bench, server: it has stopped
	KindSource      Kind = "source"       // bench, client: make the pull rows' source file
	KindMade        Kind = "made"         // bench, server: it is made
	KindUncache     Kind = "uncache"      // bench, client: remove the peer from the remote cache
	KindUncached    Kind = "uncached"     // bench, server: it is removed

	KindClock Kind = "clock" // doctor: the client asks, the server answers with its wall clock
	KindLanes Kind = "lanes" // doctor: the client asks, the server answers with its lanes
	KindProbe Kind = "probe" // doctor: the client asks for the capacity probe, the server answers with its arrivals
)

// TCPTest is one TCP measurement the bench asks the remote peer to take part in ("tcp").
type TCPTest struct {
	Streams int    `json:"streams"`
	CC      string `json:"cc,omitempty"` // the sending sockets' congestion control ("": the kernel's default)
	Seconds int    `json:"seconds"`
	// PeerSends: the remote peer sends and the client receives (the bench's --pull).
	PeerSends bool `json:"peer_sends,omitempty"`
}

// DoctorLanes is one end's UDP lanes as `farwing doctor` reports them ("facts", "lanes").
type DoctorLanes struct {
	// RecvBuf and SendBuf are the socket buffers the kernel granted each lane, in bytes of data
	// (what it reports, halved), against lane.DefaultBuffer asked for.
	RecvBuf int `json:"recv_buffer"`
	SendBuf int `json:"send_buffer"`
	// Heard (the remote peer's "lanes" answer) is how many of its lanes received the client's
	// hellos.
	Heard int `json:"lanes_heard,omitempty"`
}

// DoctorProbe is `farwing doctor`'s capacity probe ("probe"): the client's request says what
// packet trains each end sends (Up the client's, Down the server's), the server's answer carries
// the arrivals of the client's trains as its lane received them.
type DoctorProbe struct {
	Up   DoctorTrains `json:"up"`
	Down DoctorTrains `json:"down"`
	// Arrivals (the answer) has one list per train of Up, in order: for each datagram of it that
	// arrived, the microseconds since the train's previous arrival (the first's 0). Datagrams read
	// in one receive call share a time, so a 0 can also mean "in the same batch".
	Arrivals [][]int64 `json:"arrivals,omitempty"`
}

// DoctorTrains is one direction's trains in a "probe": Trains trains of Len full-size datagrams
// each, sent back to back, GapMicros apart (from one train's last datagram to the next's first).
type DoctorTrains struct {
	Trains    int `json:"trains"`
	Len       int `json:"len"`
	GapMicros int `json:"gap_us"`
}

// IsDigest reports whether s is a BLAKE3 digest in hex, as messages carry them (a file list's
// entries, the bench's files): 64 hex digits.
func IsDigest(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// sender is who may send a kind of message.
type sender uint8

const (
	byClient sender = 1 << iota
	byServer
	byEither = byClient | byServer
)

// roles are the hello roles a kind of message belongs to.
type roles uint8

const (
	inCopy roles = 1 << iota // recv and send
	inBench
	inDoctor
	inAll = inCopy | inBench | inDoctor
)

// message is what the protocol says of one kind: who may send it, in which roles, what its
// line may take where that is more than smallLine (its bulk fields: control.go, lineRule), and
// what its chunks are where it travels in chunks.
type message struct {
	from  sender
	roles roles
	line  lineRule
	chunk string
}

// messages lists every kind of message. checkLine bounds each line by it (line, chunk). from
// and roles are the protocol's documentation, held to docs/PROTOCOL.md by TestMessages: nothing
// reads them at run time, because a Control does not know its end or role; each role's own
// loop (engine.go, benchpeer, doctorpeer) refuses a kind it does not expect where it is.
var messages = map[Kind]message{
	KindReady: {from: byServer, roles: inAll},
	KindHello: {from: byClient, roles: inAll, line: lineRule{maxHelloLine, bulkPaths | bulkFilter | bulkFilesFrom}},
	KindError: {from: byEither, roles: inAll, line: lineRule{maxErrorLine, bulkErr}},
	KindBye:   {from: byEither, roles: inAll},

	KindList:    {from: byEither, roles: inCopy, line: lineRule{maxChunkWire, bulkZ}, chunk: "file list"},
	KindFiles:   {from: byServer, roles: inCopy},
	KindHave:    {from: byServer, roles: inCopy, line: lineRule{maxMessage, bulkHave | bulkResume | bulkDelta | bulkDeleting}},
	KindAccept:  {from: byClient, roles: inCopy, line: lineRule{maxMessage, bulkHave | bulkResume | bulkDelta}},
	KindSums:    {from: byEither, roles: inCopy, line: lineRule{maxSumsLine, bulkDigests}},
	KindResumed: {from: byEither, roles: inCopy, line: lineRule{maxMessage, bulkResume}},
	KindHashes:  {from: byEither, roles: inCopy, line: lineRule{maxSumsLine, bulkDigests}},
	KindChanged: {from: byEither, roles: inCopy, line: lineRule{maxChangedLine, bulkSend}},
	KindDigest:  {from: byEither, roles: inCopy},
	KindResults: {from: byEither, roles: inCopy, line: lineRule{maxChunkWire, bulkZ}, chunk: "verdict"},
	KindDone:    {from: byEither, roles: inCopy},
	KindStreams: {from: byEither, roles: inCopy},

	KindFacts:       {from: byEither, roles: inBench | inDoctor},
	KindTCP:         {from: byClient, roles: inBench},
	KindListen:      {from: byServer, roles: inBench},
	KindTCPDone:     {from: byServer, roles: inBench},
	KindCheck:       {from: byClient, roles: inBench},
	KindChecked:     {from: byServer, roles: inBench},
	KindHTTP:        {from: byClient, roles: inBench},
	KindHTTPStop:    {from: byClient, roles: inBench},
	KindHTTPStopped: {from: byServer, roles: inBench},
	KindSource:      {from: byClient, roles: inBench},
	KindMade:        {from: byServer, roles: inBench},
	KindUncache:     {from: byClient, roles: inBench},
	KindUncached:    {from: byServer, roles: inBench},

	KindClock: {from: byEither, roles: inDoctor},
	KindLanes: {from: byEither, roles: inDoctor},
	KindProbe: {from: byEither, roles: inDoctor},
}
