package xfer

// A copy's outcome as --json prints it (Result), filled from both ends' figures.

import (
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/session"
)

// Result is the outcome of a copy, as printed by --json.
type Result struct {
	Direction    string             `json:"direction"` // push or pull
	Host         string             `json:"host"`
	Transport    string             `json:"transport"` // what carried the lanes: udp; tcp where no UDP got through, ssh where TCP was blocked too (streams.go)
	Files        []fcopy.FileResult `json:"files"`
	Dirs         int                `json:"dirs,omitempty"`       // directories created or kept
	Symlinks     int                `json:"symlinks,omitempty"`   // symbolic links made, as links
	HardLinks    int                `json:"hard_links,omitempty"` // hard links made (-H)
	Skipped      *fcopy.Skipped     `json:"skipped,omitempty"`    // what the sending side left out (devices, sockets, FIFOs; loops with -L)
	Compare      string             `json:"compare"`              // what counted as already there: size-mtime, checksum or none (--ignore-times)
	SkippedFiles int                `json:"skipped_files"`        // regular files not sent: the receiver had them (on a push, the remote's word)
	SkippedBytes int64              `json:"skipped_bytes"`        // their bytes
	ResumedFiles int                `json:"resumed_files"`        // files resumed from an interrupted copy's partial file
	ResumedBytes int64              `json:"resumed_bytes"`        // the bytes of theirs kept, not sent (each block checked against the source's digest)
	DeltaFiles   int                `json:"delta_files"`          // changed files compared block by block with what the destination had
	KeptBlocks   int64              `json:"kept_blocks"`          // their blocks that were the source's already: kept at the destination, not sent
	KeptBytes    int64              `json:"kept_bytes"`           // the bytes of those blocks
	SentBlocks   int64              `json:"sent_blocks"`          // their blocks that differed (or were past the old file's end) and were sent
	Deleted      int                `json:"deleted"`              // entries --delete removed at the destination (on a push, the remote's word); with DryRun, would remove
	// DryRun (--dry-run): nothing was sent or deleted; WouldSend* are the regular files the copy
	// would send (those the destination lacks), Deleted what it would delete.
	DryRun         bool           `json:"dry_run,omitempty"`
	WouldSendFiles int            `json:"would_send_files,omitempty"`
	WouldSendBytes int64          `json:"would_send_bytes,omitempty"`
	Bytes          int64          `json:"bytes"`        // bytes of the files sent (skipped ones, resumed and kept blocks not counted)
	Seconds        float64        `json:"seconds"`      // whole command: start to verified files
	DataSeconds    float64        `json:"data_seconds"` // first data datagram to verified end
	GoodputBps     float64        `json:"goodput_bps"`  // file bits / data seconds
	DatagramsSent  uint64         `json:"datagrams_sent"`
	DatagramsRecv  uint64         `json:"datagrams_received"`
	Retransmitted  uint64         `json:"retransmitted"` // datagrams sent because of a loss (data again or repair parity)
	Lost           uint64         `json:"lost,omitempty"`
	LostByTime     uint64         `json:"lost_by_time,omitempty"` // of which by the time threshold (the rest: three or more later datagrams acknowledged)
	WireBytes      uint64         `json:"wire_bytes,omitempty"`
	WireRatio      float64        `json:"wire_ratio,omitempty"` // wire_bytes / bytes
	FEC            string         `json:"fec"`                  // the mode: off, auto or K+M
	ParitySent     uint64         `json:"parity_sent"`          // parity datagrams, proactive and repair
	RepairParity   uint64         `json:"repair_parity"`        // parity sent as repairs (in retransmitted too)
	FECGroups      uint64         `json:"fec_groups"`           // FEC groups sent (auto: one per block)
	RepairGroups   uint64         `json:"repair_groups"`        // FEC groups that needed a repair round trip
	FECRebuilt     uint64         `json:"fec_rebuilt"`          // groups rebuilt at the receiver without a round trip
	FECRepaired    uint64         `json:"fec_repaired"`         // groups rebuilt with repair parity
	FECChunks      uint64         `json:"fec_chunks"`           // chunks rebuilt at the receiver
	TailSeconds    float64        `json:"tail_seconds"`         // last new data datagram to the verified end
	ControlCopied  uint64         `json:"control_copied"`       // (push) the receiver's control messages taken from their copies on the lanes, which came before ssh brought them
	AuthFailures   uint64         `json:"auth_failures"`        // datagrams that failed authentication, at both ends
	Drops          Drops          `json:"drops"`                // datagrams this end refused, by reason
	PeerDrops      *Drops         `json:"peer_drops"`           // the same at the remote end (as it reported them)
	Duplicates     uint64         `json:"duplicates"`           // data datagrams the receiver already had (a loss declared too early)
	FeedbackHeld   uint64         `json:"feedback_held"`        // times the receiver held its feedback back for a stalled lane
	RxDropped      uint64         `json:"rx_dropped"`           // receive-buffer overflows at either end (SO_RXQ_OVFL: with GRO one may be a super-packet of many datagrams)
	Lanes          []LaneReport   `json:"lanes"`                // this end's lanes
	PeerLanes      []LaneReport   `json:"peer_lanes"`           // the remote end's lanes (empty if it did not report them)
	RTTms          float64        `json:"rtt_ms"`
	RateBps        float64        `json:"rate_bps"`
	CC             *RateStats     `json:"cc,omitempty"`
	ProbeBps       float64        `json:"probe_bps,omitempty"` // packet-train estimate of the path capacity
	StartBps       float64        `json:"start_bps,omitempty"` // the rate data started at before the handshake: what the last push on this path sustained (push, pathmem.go)
	MaxRSS         int64          `json:"max_rss_bytes"`       // this process's peak resident memory
	PeerMaxRSS     int64          `json:"peer_max_rss_bytes"`  // the remote peer's, as it reported it
	CPUSeconds     float64        `json:"cpu_seconds"`         // this process's user and system CPU time
	PeerCPU        float64        `json:"peer_cpu_seconds"`    // the remote peer's, as it reported it
	PeerUploaded   bool           `json:"peer_uploaded"`
	PeerPath       string         `json:"peer_path"`
	BootSeconds    float64        `json:"bootstrap_seconds"`                // starting the peer: the ssh session to its start, the install included when peer_uploaded
	BootBytes      int64          `json:"bootstrap_bytes"`                  // bytes of peer sent to install it (0: none)
	BootFormat     string         `json:"bootstrap_format,omitempty"`       // how they travelled: xz, gzip or raw
	BootSessions   int            `json:"bootstrap_sessions,omitempty"`     // ssh sessions the upload used (more than 1 where the first was slow)
	BootResent     int64          `json:"bootstrap_resent_bytes,omitempty"` // bytes of peer sent twice (a slow session's range sent again)
	BLAKE3         string         `json:"blake3,omitempty"`                 // the digest when one file was copied
	Sink           bool           `json:"sink,omitempty"`
	Limiter        *Limiter       `json:"limiter,omitempty"` // what held the rate where it was
	Local, Remote  map[string]any `json:"-"`
	started        time.Time
}

// newResult is the Result of a copy in direction ("push" or "pull") with host, as o asks for it,
// started now.
func newResult(direction, host string, o *Options) *Result {
	return &Result{Direction: direction, Host: host, Transport: TransportUDP, RateBps: o.Rate, Sink: o.Sink, FEC: o.FEC.String(), Compare: o.compareName(), started: time.Now()}
}

// fillSent fills r with the figures of a copy this end sent (a push): its sender's, and what the
// receiving peer reported.
func (r *Result) fillSent(side *sideResult, c *conn, plan *fcopy.Plan) {
	r.fill(side, c, plan)
	r.Retransmitted, r.Lost, r.WireBytes = side.sender.Retransmitted, side.sender.Lost, side.sender.WireBytes
	r.LostByTime = side.sender.LostByTime
	r.CC = rateStats(side.sender)
	r.ProbeBps = side.sender.ProbeBps
	r.ParitySent, r.RepairParity, r.RepairGroups = side.sender.Parity, side.sender.RepairParity, side.sender.RepairGroups
	r.FECGroups = side.sender.Groups
	r.TailSeconds = side.tailSeconds()
	r.ControlCopied = c.ctl.Copied.Load()
	if ps := side.peerStats; ps != nil {
		r.Deleted = max(ps.Deleted, 0)
		r.FECRebuilt, r.FECRepaired, r.FECChunks = ps.FECRebuilt, ps.FECRepaired, ps.FECChunks
		r.Duplicates, r.FeedbackHeld = ps.Duplicates, ps.Held
		r.setPeerLanes(ps.Lanes)
	}
	r.setWireRatio()
	peerCores := 0
	if ps := side.peerStats; ps != nil {
		peerCores = ps.Cores
	}
	r.setLimiter(true, side.sender.WindowFull.Seconds(), side.sender.SourceWait.Seconds(), peerCores)
}

// fillReceived fills r with the figures of a copy this end received (a pull): its receiver's, and
// what the sending peer reported.
func (r *Result) fillReceived(side *sideResult, c *conn, plan *fcopy.Plan) {
	r.fill(side, c, plan)
	r.Deleted = side.deleted
	if ps := side.peerStats; ps != nil {
		r.Retransmitted, r.Lost, r.WireBytes, r.CC = ps.Retransmitted, ps.Lost, ps.WireBytes, ps.CC
		r.LostByTime = ps.LostByTime
		if r.CC != nil {
			r.CC.Verdicts = checkVerdicts(r.CC.Verdicts)
		}
		if r.CC != nil && r.CC.SRTTms > 0 {
			r.RTTms = r.CC.SRTTms
		}
		r.ParitySent, r.RepairParity, r.RepairGroups, r.TailSeconds = ps.Parity, ps.RepairParity, ps.RepairGroups, ps.TailSeconds
		r.FECGroups = ps.Groups
		r.ProbeBps = ps.ProbeBps
		r.setPeerLanes(ps.Lanes)
	}
	r.FECRebuilt, r.FECRepaired, r.FECChunks = side.receiver.FECRebuilt, side.receiver.FECRepaired, side.receiver.FECChunks
	r.Duplicates, r.FeedbackHeld = side.receiver.Duplicates, side.receiver.Held
	r.setWireRatio()
	if ps := side.peerStats; ps != nil {
		r.setLimiter(false, ps.WindowSeconds, ps.SourceSeconds, ps.Cores)
	}
}

func (r *Result) setPeerLanes(ls []LaneReport) {
	if len(ls) > session.Lanes { // the peer's word: at most its four lanes
		ls = ls[:session.Lanes]
	}
	r.PeerLanes = ls
	for _, l := range ls {
		r.RxDropped += l.RxDropped
	}
}

func (r *Result) setWireRatio() {
	if r.Bytes > 0 {
		r.WireRatio = float64(r.WireBytes) / float64(r.Bytes)
	}
}

func (r *Result) fill(side *sideResult, c *conn, plan *fcopy.Plan) {
	r.Files = side.results
	for _, f := range plan.Files {
		switch {
		case f.Dir:
			r.Dirs++
		case f.Link != "":
			r.Symlinks++
		case f.Hard != "":
			r.HardLinks++
		}
	}
	r.Bytes = plan.TotalBytes()
	r.SkippedFiles, r.SkippedBytes = plan.SkippedFiles()
	r.ResumedFiles, r.ResumedBytes = plan.ResumedFiles()
	d := plan.DeltaStats()
	r.DeltaFiles, r.KeptBlocks, r.KeptBytes, r.SentBlocks = d.Files, d.KeptBlocks, d.KeptBytes, d.SentBlocks
	r.Seconds = time.Since(r.started).Seconds()
	r.DataSeconds = side.end.Sub(side.start).Seconds()
	if r.DataSeconds > 0 {
		r.GoodputBps = float64(r.Bytes) * 8 / r.DataSeconds
	}
	r.Lanes = laneReports(c.path)
	for _, l := range r.Lanes {
		r.DatagramsSent += l.Sent
		r.DatagramsRecv += l.Received
		r.RxDropped += l.RxDropped
	}
	invalid := side.sender.BadFeedback + side.receiver.Invalid // one of them is zero: this end's role
	r.Drops = pathDrops(c.path, invalid)
	r.AuthFailures = r.Drops.AuthFailures
	r.MaxRSS, r.CPUSeconds = maxRSS(), cpuSeconds()
	if ps := side.peerStats; ps != nil {
		r.PeerMaxRSS, r.PeerCPU = ps.MaxRSS, ps.CPUSeconds
		r.PeerDrops = ps.Drops
		r.AuthFailures += ps.AuthFailures
	}
	r.RTTms = float64(c.rtt) / 1e6
	if side.sender.SRTT > 0 {
		r.RTTms = float64(side.sender.SRTT) / 1e6
	}
	if len(r.Files) == 1 {
		r.BLAKE3 = r.Files[0].Sum
	}
}
