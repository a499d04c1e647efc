//go:build linux

// Package lab is a userspace WAN emulator between two network namespaces.
//
// The kernel on the benchmark machines has no netem qdisc, so a Lab joins
// two fresh namespaces with a pair of TUN devices and forwards packets
// between them in this process, applying per direction a bottleneck rate
// with a drop-tail queue, a one-way delay and random loss. Kernel TCP, ssh
// and anything else run through it unchanged. Addresses come from the
// benchmark range 198.18.0.0/15 and exist only inside the lab's namespaces.
//
// Start needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), /dev/net/tun and the
// iproute2 `ip` tool.
//
// With Config.Veth the namespaces are joined by a veth pair instead, with no
// emulator: the kernel's own path, shaped only by a rate (HTB) where asked
// (veth.go). It needs `tc` instead of /dev/net/tun.
package lab

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Path describes one direction of the emulated link.
type Path struct {
	RateBps    float64       // bottleneck rate in bits/s counted in IP bytes (0 = unlimited)
	Delay      time.Duration // one-way propagation delay
	Loss       float64       // random (Bernoulli) loss probability 0..1, applied before the queue
	QueueBytes int           // drop-tail queue limit in bytes (0 = one BDP of RateBps×2×Delay, min 64 KiB)
	DropUDP    bool          // drop every UDP packet (a firewall that blocks UDP); counted in PathStats.Blocked
	// DropTCP drops every TCP segment to a destination port in its range (a firewall that blocks
	// those ports; the zero range: none), counted in PathStats.Blocked.
	DropTCP Ports
}

// Ports is a range of ports, Lo to Hi; the zero value holds none.
type Ports struct{ Lo, Hi uint16 }

// Has reports whether port lies in r.
func (r Ports) Has(port uint16) bool { return r.Hi != 0 && port >= r.Lo && port <= r.Hi }

// Config describes both directions of a Lab.
type Config struct {
	AtoB, BtoA Path
	Seed       int64 // seeds the loss processes; equal seeds give equal loss patterns for equal traffic
	// Veth joins the namespaces with a veth pair (MTU 1500) and no emulator: each direction's
	// rate is an HTB class on its sender's egress (none: unlimited), its queue a bfifo under it.
	// A Path with a delay, random loss or DropUDP is refused (VethRefuses).
	Veth bool
}

// Direction names one direction of a Lab.
type Direction int

const (
	AtoB Direction = iota
	BtoA
)

func (d Direction) String() string {
	if d == BtoA {
		return "B->A"
	}
	return "A->B"
}

// Symmetric returns a Config with the same path in both directions, the
// usual shape for a benchmark: rtt/2 each way.
func Symmetric(rateBps float64, rtt time.Duration, loss float64, queueBytes int, seed int64) Config {
	p := Path{RateBps: rateBps, Delay: rtt / 2, Loss: loss, QueueBytes: queueBytes}
	return Config{AtoB: p, BtoA: p, Seed: seed}
}

// DevName is the name of the TUN device inside both namespaces.
const DevName = "lab0"

// Lab is a running emulated link between namespaces NSA and NSB.
type Lab struct {
	NSA, NSB     string     // network namespace names, for `ip netns exec`
	AddrA, AddrB netip.Addr // the two ends' addresses
	Prefix       netip.Prefix
	Veth         bool // a veth pair, no emulator (Config.Veth)

	vethMu   sync.Mutex
	vethPath [2]Path // the veth path's shaping, as set

	tunA, tunB *os.File
	links      [2]*link
	done       chan struct{}
	wg         sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	errMu     sync.Mutex
	loopErr   error
}

var labSeq atomic.Uint32

// Check reports why a Lab cannot be started on this machine, or nil.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("lab: needs root (creates network namespaces and TUN devices); run as root")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("lab: no TUN support: %w", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("lab: iproute2 `ip` not found: %w", err)
	}
	return nil
}

// Start creates the namespaces and devices and starts forwarding (with
// cfg.Veth: joins them with a veth pair and shapes it).
func Start(cfg Config) (_ *Lab, err error) {
	if cfg.Veth {
		if err := CheckVeth(); err != nil {
			return nil, err
		}
		if err := errors.Join(VethRefuses(cfg.AtoB), VethRefuses(cfg.BtoA)); err != nil {
			return nil, err
		}
	} else if err := Check(); err != nil {
		return nil, err
	}
	RemoveStale()
	l := &Lab{done: make(chan struct{}), Veth: cfg.Veth}
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()

	// Unique names and a unique /30 per lab so several labs (also from
	// parallel test binaries) coexist and are easy to attribute in
	// `ip netns list`. Retry a few numbers in case a crashed run with a
	// recycled pid left namespaces behind.
	pid := os.Getpid()
	var n uint32
	for try := 0; ; try++ {
		n = labSeq.Add(1)
		l.NSA = fmt.Sprintf("fw-%d-%d-a", pid, n)
		l.NSB = fmt.Sprintf("fw-%d-%d-b", pid, n)
		errA := ipCmd("netns", "add", l.NSA)
		if errA == nil {
			if errB := ipCmd("netns", "add", l.NSB); errB == nil {
				break
			} else {
				_ = ipCmd("netns", "del", l.NSA)
				errA = errB
			}
		}
		if try == 3 {
			return nil, errA
		}
	}
	cleanups = append(cleanups, func() {
		_ = ipCmd("netns", "del", l.NSA)
		_ = ipCmd("netns", "del", l.NSB)
	})
	// 198.18.0.0/15 holds 32768 /30 blocks; block 0 is skipped so that no
	// lab uses the network's first address.
	block := 1 + (uint32(pid)*257+n)%32767
	base := uint32(198)<<24 | uint32(18)<<16 | block*4
	l.Prefix = netip.PrefixFrom(addr4(base), 30)
	l.AddrA = addr4(base + 1)
	l.AddrB = addr4(base + 2)

	// Per-namespace settings, applied before the devices move in so that
	// the devices inherit them. IPv6 is off to keep router solicitations
	// and MLD out of the statistics. The TCP buffer maxima let one flow
	// fill 400 Mbit/s × 140 ms (7 MB) plus a 1-BDP queue; the receiver
	// needs about twice its window in buffer. tcp_no_metrics_save keeps
	// one run's ssthresh from leaking into the next.
	for _, ns := range []string{l.NSA, l.NSB} {
		if err := run("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
			"net.ipv6.conf.all.disable_ipv6=1",
			"net.ipv6.conf.default.disable_ipv6=1",
			"net.ipv4.tcp_rmem=4096 131072 134217728",
			"net.ipv4.tcp_wmem=4096 16384 134217728",
			"net.ipv4.tcp_no_metrics_save=1",
		); err != nil {
			return nil, err
		}
	}

	if cfg.Veth {
		if err := l.startVeth(cfg); err != nil {
			return nil, err
		}
		return l, nil
	}
	var nameA, nameB string
	if l.tunA, nameA, err = openTUN(); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { l.tunA.Close() })
	if l.tunB, nameB, err = openTUN(); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { l.tunB.Close() })

	for _, c := range []struct {
		ns, dev string
		addr    netip.Addr
	}{{l.NSA, nameA, l.AddrA}, {l.NSB, nameB, l.AddrB}} {
		if err := ipCmd("link", "set", "dev", c.dev, "netns", c.ns); err != nil {
			return nil, err
		}
		// txqueuelen sizes the TUN device's packet ring; the kernel drops
		// when it is full, which would add loss we did not configure when
		// a sender bursts faster than this process reads.
		batch := fmt.Sprintf(`link set dev %s name %s
link set dev %s mtu 1500 txqueuelen 10000 up
addr add %s dev %s
link set dev lo up
`, c.dev, DevName, DevName, netip.PrefixFrom(c.addr, 30), DevName)
		if err := runStdin(batch, "ip", "-n", c.ns, "-batch", "-"); err != nil {
			return nil, err
		}
	}

	epoch := time.Now()
	seed := uint64(cfg.Seed)
	l.links[AtoB] = newLink(l.tunA, l.tunB, cfg.AtoB, seed*2+1, epoch, l.done)
	l.links[BtoA] = newLink(l.tunB, l.tunA, cfg.BtoA, seed*2+2, epoch, l.done)
	for _, lk := range l.links {
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			if err := lk.readLoop(); err != nil {
				l.errMu.Lock()
				l.loopErr = errors.Join(l.loopErr, err)
				l.errMu.Unlock()
			}
		}()
		go func() {
			defer l.wg.Done()
			lk.releaseLoop()
		}()
	}
	return l, nil
}

func addr4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// openTUN creates a TUN device in the current (root) namespace and returns
// a pollable file for it, so that Close unblocks pending reads.
func openTUN() (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", fmt.Errorf("lab: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq("fwlab%d")
	if err != nil {
		unix.Close(fd)
		return nil, "", err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("lab: TUNSETIFF: %w", err)
	}
	name := ifr.Name()
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), name, nil
}

// SetPath changes one direction while the lab runs. Packets already queued
// keep their release times; new packets follow p. On a veth Lab it changes
// the HTB class (queued packets stay queued); what the veth path cannot do
// is refused and kept for Err (use Set to have it back at once).
func (l *Lab) SetPath(dir Direction, p Path) {
	if err := l.Set(dir, p); err != nil {
		l.errMu.Lock()
		l.loopErr = errors.Join(l.loopErr, err)
		l.errMu.Unlock()
	}
}

// Set is SetPath, returning what the path refused: on a veth Lab a delay,
// random loss or a UDP block (VethRefuses), or a tc command that failed.
func (l *Lab) Set(dir Direction, p Path) error {
	if l.Veth {
		return l.setVeth(dir, p)
	}
	l.links[dir].update(p)
	return nil
}

// Path returns the current settings of one direction.
func (l *Lab) Path(dir Direction) Path {
	if l.Veth {
		l.vethMu.Lock()
		defer l.vethMu.Unlock()
		return l.vethPath[dir]
	}
	lk := l.links[dir]
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.path
}

// Stats returns the counters of both directions. On a veth Lab they are the
// kernel's (vethStats: frames and IP bytes delivered, qdisc and veth drops),
// read with `ip` and `tc`; the emulator's other counters stay 0.
func (l *Lab) Stats() (atob, btoa PathStats) {
	if l.Veth {
		return l.vethStats(AtoB), l.vethStats(BtoA)
	}
	return l.links[AtoB].snapshot(), l.links[BtoA].snapshot()
}

// Command returns a command that runs name inside namespace ns (NSA or NSB).
func (l *Lab) Command(ns string, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Do runs fn on an OS thread that has joined namespace ns. Sockets created
// by fn belong to ns and keep working after fn returns, so a test can hold
// both ends of a connection in one process. fn must not start goroutines
// that expect to be in ns.
func (l *Lab) Do(ns string, fn func() error) error {
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("lab: open netns %s: %w", ns, err)
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	// A fresh goroutine: if the thread cannot be switched back, it exits
	// still locked and the runtime discards the thread instead of reusing
	// it in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("lab: setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Err reports a forwarding loop that stopped on an unexpected error.
func (l *Lab) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.loopErr
}

// Close stops forwarding, ends the processes still running in the
// namespaces (a shared ssh connection's master outlives the copy that
// started it by a minute; a daemonized iperf3 forever) and removes the
// devices and namespaces. Close is idempotent.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		killIn(l.NSA, l.NSB)
		close(l.done)
		// Closing the files unblocks readers through the poller; the
		// devices vanish with their last file descriptor. A veth pair
		// goes with its namespaces.
		var errs []error
		if !l.Veth {
			errs = append(errs, l.tunA.Close(), l.tunB.Close())
		}
		l.wg.Wait()
		errs = append(errs, ipCmd("netns", "del", l.NSA), ipCmd("netns", "del", l.NSB))
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

func ipCmd(args ...string) error { return run("ip", args...) }

// killIn ends every process whose network namespace is one of nss (except
// this one): SIGTERM, then SIGKILL to those left after a second.
func killIn(nss ...string) {
	pids := func() []int {
		var ps []int
		for _, ns := range nss {
			out, err := exec.Command("ip", "netns", "pids", ns).Output()
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(out)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					ps = append(ps, pid)
				}
			}
		}
		return ps
	}
	ps := pids()
	if len(ps) == 0 {
		return
	}
	for _, pid := range ps {
		unix.Kill(pid, unix.SIGTERM)
	}
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		if ps = pids(); len(ps) == 0 {
			return
		}
	}
	for _, pid := range ps {
		unix.Kill(pid, unix.SIGKILL)
	}
}

func run(name string, args ...string) error { return runStdin("", name, args...) }

func runStdin(stdin, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("lab: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
