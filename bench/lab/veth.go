//go:build linux

package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The veth path (Config.Veth): the two namespaces joined by a veth pair, the kernel's own path
// with no process between the ends, for figures at rates the emulator cannot carry (it
// saturates at 2–3 Gbit/s). What it can do is a rate: an HTB class on each end's egress, set so
// that full-size packets cross at the rate in IP bytes like the emulator's (HTBRate), and a byte
// queue under it. This kernel has no netem, so a delay, random loss or a UDP block has no
// kernel implementation here: Start and SetPath refuse them rather than leave them out.

const (
	// ethHeader is what a veth frame carries beyond the IP packet; rates and byte counters of
	// the veth path allow for it so that they count IP bytes, as the emulator's do.
	ethHeader = 14
	// mtu is the veth pair's MTU: a full-size packet's IP bytes.
	mtu = 1500
	// htbQuantum is the HTB class's quantum: one class, so it only has to hold a GSO
	// super-packet (without it HTB derives rate/10 and warns above 200,000 bytes).
	htbQuantum = 200000
	// minBurst is the least HTB burst: one GSO super-packet (64 KiB of payload and its headers)
	// with room to spare, so that one never waits for tokens it cannot hold.
	minBurst = 96 << 10
)

// CheckVeth reports why a veth Lab cannot be started on this machine, or nil.
func CheckVeth() error {
	if os.Geteuid() != 0 {
		return errors.New("lab: needs root (creates network namespaces and a veth pair); run as root")
	}
	for _, bin := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("lab: iproute2 `%s` not found: %w", bin, err)
		}
	}
	return nil
}

// VethRefuses names what of p the veth path cannot do (no netem in this kernel, no emulator
// in the path), or returns nil: a Path for a veth Lab has only a rate and a queue.
func VethRefuses(p Path) error {
	var what []string
	if p.Delay != 0 {
		what = append(what, fmt.Sprintf("a delay (%v each way)", p.Delay))
	}
	if p.Loss != 0 {
		what = append(what, fmt.Sprintf("random loss (%g%%)", p.Loss*100))
	}
	if p.DropUDP {
		what = append(what, "a UDP block")
	}
	if p.DropTCP != (Ports{}) {
		what = append(what, "a TCP port block")
	}
	if p.QueueBytes > 0 && p.RateBps == 0 {
		what = append(what, "a queue without a rate")
	}
	if len(what) == 0 {
		return nil
	}
	return fmt.Errorf("lab: the veth path has no %s: this kernel has no netem and the veth lab no emulator (rate and queue only)",
		strings.Join(what, ", "))
}

// startVeth joins l's namespaces with a veth pair named DevName at both ends, MTU 1500, and
// shapes each direction as cfg asks.
func (l *Lab) startVeth(cfg Config) error {
	if err := ipCmd("link", "add", DevName, "netns", l.NSA, "type", "veth", "peer", "name", DevName, "netns", l.NSB); err != nil {
		return err
	}
	for _, c := range []struct {
		ns   string
		addr netip.Addr
	}{{l.NSA, l.AddrA}, {l.NSB, l.AddrB}} {
		batch := fmt.Sprintf(`link set dev %s mtu 1500 up
addr add %s dev %s
link set dev lo up
`, DevName, netip.PrefixFrom(c.addr, 30), DevName)
		if err := runStdin(batch, "ip", "-n", c.ns, "-batch", "-"); err != nil {
			return err
		}
	}
	for _, d := range []Direction{AtoB, BtoA} {
		p := cfg.AtoB
		if d == BtoA {
			p = cfg.BtoA
		}
		if err := l.setVeth(d, p); err != nil {
			return err
		}
	}
	return nil
}

// egressNS is the namespace whose lab0 sends direction d.
func (l *Lab) egressNS(d Direction) string {
	if d == BtoA {
		return l.NSB
	}
	return l.NSA
}

// setVeth shapes direction d of a veth Lab as p: no qdisc (the veth's own noqueue) without a
// rate; with one, a root HTB with one class at HTBRate(p.RateBps), ceil the same, and a bfifo of p.QueueBytes under it (0: HTB's default leaf, a pfifo of the
// device's txqueuelen packets). A change of rate changes the class, so that what is queued
// stays queued, as in the emulator.
func (l *Lab) setVeth(d Direction, p Path) error {
	if err := VethRefuses(p); err != nil {
		return err
	}
	l.vethMu.Lock()
	defer l.vethMu.Unlock()
	ns := l.egressNS(d)
	var batch strings.Builder
	switch {
	case p.RateBps == 0 && l.vethPath[d].RateBps == 0:
	case p.RateBps == 0:
		fmt.Fprintf(&batch, "qdisc del dev %s root\n", DevName)
	default:
		verb := "change"
		if l.vethPath[d].RateBps == 0 {
			verb = "add"
			fmt.Fprintf(&batch, "qdisc add dev %s root handle 1: htb default 1\n", DevName)
		}
		rate := strconv.FormatFloat(HTBRate(p.RateBps), 'f', 0, 64) + "bit"
		burst := HTBBurst(p.RateBps)
		fmt.Fprintf(&batch, "class %s dev %s parent 1: classid 1:1 htb rate %s ceil %s burst %d cburst %d quantum %d\n",
			verb, DevName, rate, rate, burst, burst, htbQuantum)
		if p.QueueBytes > 0 {
			fmt.Fprintf(&batch, "qdisc replace dev %s parent 1:1 handle 10: bfifo limit %d\n", DevName, p.QueueBytes)
		} else if l.vethPath[d].QueueBytes > 0 {
			fmt.Fprintf(&batch, "qdisc del dev %s parent 1:1 handle 10:\n", DevName)
		}
	}
	if batch.Len() > 0 {
		if err := runStdin(batch.String(), "tc", "-n", ns, "-batch", "-"); err != nil {
			return err
		}
	}
	l.vethPath[d] = p
	return nil
}

// HTBRate is the HTB class's rate for a path of rateBps in IP bytes. HTB counts a frame's
// 14-byte Ethernet header, and a GSO super-packet's as its segments' (the kernel's qdisc
// length adds each later segment's headers), so the class runs at rateBps × 1514/1500: exact
// for full-size packets, as the emulator counts them, and about 1 % generous to a segment of
// 1,480 bytes (a Farwing datagram). A size table with overhead −14 would count a super-packet's
// headers once, so TCP's and UDP's segments would cross about 3 % faster than the rate.
func HTBRate(rateBps float64) float64 { return math.Round(rateBps * (mtu + ethHeader) / mtu) }

// HTBBurst is the burst of the veth path's HTB class at rateBps: a millisecond at the rate, at
// least 96 KiB (one GSO super-packet and room to spare).
func HTBBurst(rateBps float64) int { return max(int(rateBps/8/1000), minBurst) }

// vethStats reads direction d's counters from the kernel: the receiving end's frames and bytes
// (less the Ethernet headers: IP bytes), the sending end's qdisc drops, and what either veth
// dropped. A GSO super-packet crosses a veth whole, so Packets counts frames, not datagrams.
func (l *Lab) vethStats(d Direction) PathStats {
	from, to := l.NSA, l.NSB
	if d == BtoA {
		from, to = l.NSB, l.NSA
	}
	var s PathStats
	if rx, err := linkStats(to); err == nil {
		s.Packets, s.Bytes = rx.RX.Packets, rx.RX.Bytes-ethHeader*rx.RX.Packets
		s.KernelDrops += rx.RX.Dropped
	}
	if tx, err := linkStats(from); err == nil {
		s.KernelDrops += tx.TX.Dropped
	}
	s.QueueDrops = qdiscDrops(from)
	return s
}

type devStats struct {
	RX, TX struct{ Bytes, Packets, Dropped uint64 }
}

// linkStats is `ip -s -j link show lab0` in namespace ns.
func linkStats(ns string) (devStats, error) {
	out, err := exec.Command("ip", "-n", ns, "-s", "-j", "link", "show", "dev", DevName).Output()
	if err != nil {
		return devStats{}, err
	}
	var links []struct {
		Stats64 devStats `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return devStats{}, fmt.Errorf("lab: ip -s -j link: %q", out)
	}
	return links[0].Stats64, nil
}

// qdiscDrops is the drops of lab0's root qdisc in namespace ns (0 where it has none).
func qdiscDrops(ns string) uint64 {
	out, err := exec.Command("tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", DevName, "root").Output()
	if err != nil {
		return 0
	}
	var qs []struct {
		Drops uint64 `json:"drops"`
	}
	if json.Unmarshal(out, &qs) != nil || len(qs) == 0 {
		return 0
	}
	return qs[0].Drops
}
