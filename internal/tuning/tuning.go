// Package tuning is where Farwing's tuning is decided, in one place.
//
// Settings are the environment's switches: debugging and measurement knobs, not a stable
// interface. cmd/farwing reads them once, at the command's edge (FromEnv), and passes them down
// as a value (xfer.Options.Tuning, xfer.ServeOptions.Tuning); nothing below cmd/farwing reads the
// environment. Apply sets the two that are process-wide (block memory, the AES-GCM
// implementation); the rest travel with the copy's options.
//
// The rules that size a copy from its path are here too: the receive window (WindowBlocks,
// ClampWindow, ReceiveWindow), large chunks on loopback (Settings.Jumbo), FEC on loopback (FEC),
// the loopback sender's share of the CPUs (Settings.ShareCPUs) and the collector
// (Settings.TuneGC).
package tuning

import (
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/aesgcm"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// Settings are the environment's switches. The zero value is an empty environment: every
// default on.
type Settings struct {
	// Debug (FARWING_DEBUG, any value): the engines print their state every second through the
	// debug logger (xfer.Options.DebugLog), ssh runs verbose, and the client asks the remote peer
	// to do the same in its hello.
	Debug bool
	// Profile (FARWING_CPUPROFILE) is a path prefix: the copy's CPU profile is written to
	// PREFIX.ROLE.PID.pprof (StartProfile). The remote peer profiles only where its own
	// environment sets it (xfer.Serve ignores the prefix in the client's hello).
	Profile     string
	NoDirectIO  bool // FARWING_DIRECT=0: the writer never uses O_DIRECT
	NoHugePages bool // FARWING_HUGEPAGES=0: block buffers come from the heap, not the huge-page arena
	NoVAES      bool // FARWING_VAES=0: crypto/cipher's AES-GCM even where the CPU has VAES
	NoJumbo     bool // FARWING_JUMBO=0: standard chunks on loopback too (Jumbo)
	NoPathMem   bool // FARWING_PATHMEM=0: a copy neither reads nor keeps path records (xfer.Options.PathMemory)
	NoGSO       bool // FARWING_GSO set to a false value ("0", "false", "off", "no"): no UDP segmentation offload
	NoGRO       bool // FARWING_GRO set to a false value: no UDP receive coalescing
	Portable    bool // FARWING_SOCKETS=portable: lanes on macOS's socket path, one datagram per system call (lane.Options.Portable; Linux only)
	// UserGOMAXPROCS and UserGOGC say the user set GOMAXPROCS or GOGC: ShareCPUs and TuneGC
	// leave the runtime alone.
	UserGOMAXPROCS, UserGOGC bool
	SSH                      string // FARWING_SSH: the ssh program (tests; "": ssh from PATH)
	SCP                      string // FARWING_SCP: the scp program of the bench's scp row ("": scp from PATH)
}

// ProfileEnv names the environment variable of Settings.Profile.
const ProfileEnv = "FARWING_CPUPROFILE"

// FromEnv reads the switches from an environment (os.Getenv).
func FromEnv(getenv func(string) string) Settings {
	return Settings{
		Debug:          getenv("FARWING_DEBUG") != "",
		Profile:        getenv(ProfileEnv),
		NoDirectIO:     getenv("FARWING_DIRECT") == "0",
		NoHugePages:    getenv("FARWING_HUGEPAGES") == "0",
		NoVAES:         getenv("FARWING_VAES") == "0",
		NoJumbo:        getenv("FARWING_JUMBO") == "0",
		NoPathMem:      getenv("FARWING_PATHMEM") == "0",
		NoGSO:          off(getenv("FARWING_GSO")),
		NoGRO:          off(getenv("FARWING_GRO")),
		Portable:       getenv("FARWING_SOCKETS") == "portable",
		UserGOMAXPROCS: getenv("GOMAXPROCS") != "",
		UserGOGC:       getenv("GOGC") != "",
		SSH:            getenv("FARWING_SSH"),
		SCP:            getenv("FARWING_SCP"),
	}
}

// off reports whether v is a false value ("0", "false", "off", "no" and what strconv.ParseBool
// reads as false); "" and anything else are not.
func off(v string) bool {
	if v == "" {
		return false
	}
	if v == "off" || v == "no" {
		return true
	}
	b, err := strconv.ParseBool(v)
	return err == nil && !b
}

// Apply sets the process-wide switches: where block buffers come from and which AES-GCM the
// session keys use. cmd/farwing calls it once, before any copy starts.
func (s Settings) Apply() {
	fcopy.SetHugePages(!s.NoHugePages)
	aesgcm.SetVAES(!s.NoVAES)
}

// Lane is the lane options of a path's UDP sockets with buffers of buf bytes (0: the default).
func (s Settings) Lane(buf int) lane.Options {
	return lane.Options{Buffer: buf, DisableGSO: s.NoGSO, DisableGRO: s.NoGRO, Portable: s.Portable}
}

// Writer adds the switches that concern writing to o.
func (s Settings) Writer(o fcopy.WriterOptions) fcopy.WriterOptions {
	o.NoDirectIO = s.NoDirectIO
	return o
}

// Jumbo says whether a client proposes large datagrams (wire.JumboChunkSize chunks) in the
// handshake with a server at addr: on a loopback path whose interface takes them (its MTU is
// normally 65,536), unless NoJumbo. Loopback copies of 2 GiB: 1.14 against 1.38 CPU s/GiB, 12.2
// against 10.0 Gbit/s (medians of 6, interleaved).
func (s Settings) Jumbo(addr netip.Addr) bool {
	return addr.Unmap().IsLoopback() && !s.NoJumbo &&
		loopbackMTU() >= wire.DatagramFor(wire.JumboChunkSize)+lane.IPv6UDPHeaders
}

// loopbackMTU is the smallest MTU of this host's loopback interfaces (0 if none is found).
func loopbackMTU() int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	mtu := 0
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 && i.Flags&net.FlagUp != 0 && (mtu == 0 || i.MTU < mtu) {
			mtu = i.MTU
		}
	}
	return mtu
}

// FEC is the FEC mode a sender uses when asked for m, on a loopback path or not: automatic FEC
// is off on loopback. It sizes parity for random loss on long paths; on loopback a loss is a
// receiving socket that fell behind, a re-send costs microseconds, and repair parity costs a
// Reed-Solomon pass over the block at both ends (2 GiB copies that overflowed a socket sent
// 400-1,850 repair shards). An explicit --fec k+m still applies.
func FEC(loopback bool, m fec.Mode) fec.Mode {
	if m.Kind == fec.ModeAuto && loopback {
		return fec.Mode{Kind: fec.ModeOff}
	}
	return m
}

// LoopbackWindow is the receive window on a loopback path unless --window says otherwise. The
// window is chosen before the round trip is known (300 ms assumed: 373 blocks); on loopback rate
// × RTT is a fraction of one block, and the window only has to cover the blocks being assembled
// and the receiver's writer falling behind for a moment. More costs memory the copy touches for
// the first time (a new block buffer, at either end, is zeroed and faulted in: ~1.3 ms of CPU
// per MiB on this project's VM) and cache. Interleaved loopback copies, medians of 6-8: window
// 373 9.3, 64 9.5-9.7, 48 9.7, 32 9.4-10.5, 24 10.1-10.8, 16 9.7 Gbit/s.
const LoopbackWindow = 32

// ReceiveWindow is the window the receiver uses, and the sender starts with, on a path: the one
// agreed, or LoopbackWindow on a loopback path when the window was not set by hand (auto). Both
// ends apply it to the same path: the sender must not start beyond the window the receiver has
// memory for (its feedback only tells it a few milliseconds in).
func ReceiveWindow(loopback bool, window int, auto bool) int {
	if auto && loopback {
		return min(window, LoopbackWindow)
	}
	return window
}

// WindowBlocks sizes the receive window: four round trips at the target rate plus slack, so that
// repairs never wait on the window, within 64 MiB … 1 GiB of memory per side. An unknown rtt is
// taken as 300 ms.
func WindowBlocks(rate float64, rtt time.Duration) int {
	if rtt <= 0 {
		rtt = 300 * time.Millisecond
	}
	if rate <= 0 {
		rate = 2.5e9 // no ceiling: size for a fast path; memory is taken only as data is in flight
	}
	w := int(4*rate/8*rtt.Seconds()/fcopy.BlockSize) + 16
	return min(max(w, 64), 1024)
}

// ClampWindow bounds the window a client asked for (blocks of 1 MiB): the memory the serving end
// gives the transfer, whatever the client says.
func ClampWindow(w int) int { return min(max(w, 16), 1024) }

// ShareCPUs: on a loopback path both ends run on this machine, and the sender gives up half of
// its CPUs (GOMAXPROCS, unless the user set it) so that it cannot starve the receiver, whose four
// lanes drop what they cannot take in time. (The sender is then the busier end: its sends also
// run the receiving socket's side of the kernel.)
// On 2 CPUs, sender 1 and receiver 2 against 2 and 2: 10.3 against 9.4 Gbit/s median over 4
// loopback copies each, at 1.35-1.47 against 1.53-1.81 CPU s/GiB; a receiver at 1 was slower
// either way (7.4-9.1).
func (s Settings) ShareCPUs(loopback bool) {
	if loopback && !s.UserGOMAXPROCS {
		runtime.GOMAXPROCS(max(runtime.NumCPU()/2, 1))
	}
}

// TuneGC keeps the Go heap close to what is live, unless the user set GOGC. Most of a transfer's
// heap is fixed: the wide Reed-Solomon tables (74 MiB once FEC is warm), the sender's record of
// datagrams in flight; what it allocates as it goes is small (a few MB/s: per-block state,
// feedback). With the default GOGC of 100 the heap grew to twice the live heap before a collection
// (a receiver at 700 Mbit/s: 120 MiB live, 178 MiB taken); at 10 % a collection comes every few
// seconds and costs about a millisecond, and the heap stays within a tenth of what is live.
func (s Settings) TuneGC() {
	if !s.UserGOGC {
		debug.SetGCPercent(10)
	}
}
