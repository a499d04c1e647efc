//go:build linux

package main

// A flood at every UDP port of both ends while a copy runs through the lab, with real sockets:
// random bytes, truncated and forged copies of real datagrams, and exact replays of datagrams
// captured on the way in.

import (
	"encoding/binary"
	mathrand "math/rand/v2"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/bench/lab"
)

// udpPorts lists the UDP ports that processes named like comm hold in namespace ns.
func (e *labEnv) udpPorts(ns, comm string) []int {
	out, _ := e.l.Command(ns, "ss", "-Hunap").Output()
	re := regexp.MustCompile(`:(\d+)\s+\S+\s+users:\(\("` + comm)
	var ports []int
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		p, _ := strconv.Atoi(m[1])
		ports = append(ports, p)
	}
	return ports
}

type captured struct {
	port int
	b    []byte
}

// sniffer captures the payloads of UDP datagrams arriving at ports on the lab's device in ns.
type sniffer struct {
	mu   sync.Mutex
	got  []captured
	fd   int
	stop atomic.Bool
}

func (e *labEnv) sniff(ns string, ports []int) *sniffer {
	e.t.Helper()
	s := &sniffer{fd: -1}
	want := map[uint16]bool{}
	for _, p := range ports {
		want[uint16(p)] = true
	}
	err := e.l.Do(ns, func() error {
		ifi, err := net.InterfaceByName(lab.DevName)
		if err != nil {
			return err
		}
		proto := uint16(unix.ETH_P_IP&0xff)<<8 | uint16(unix.ETH_P_IP>>8) // network order
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(proto))
		if err != nil {
			return err
		}
		s.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index})
	})
	if err != nil {
		e.t.Fatalf("sniffer in %s: %v", ns, err)
	}
	unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	go func() {
		buf := make([]byte, 65536)
		for !s.stop.Load() {
			n, _, err := unix.Recvfrom(s.fd, buf, 0)
			if err != nil || n < 28 || buf[0]>>4 != 4 || buf[9] != unix.IPPROTO_UDP {
				continue
			}
			ihl := int(buf[0]&15) * 4
			if n < ihl+8 || !want[binary.BigEndian.Uint16(buf[ihl+2:])] {
				continue
			}
			s.mu.Lock()
			if len(s.got) < 4000 {
				s.got = append(s.got, captured{int(binary.BigEndian.Uint16(buf[ihl+2:])), append([]byte(nil), buf[ihl+8:n]...)})
			}
			s.mu.Unlock()
		}
		unix.Close(s.fd)
	}()
	e.t.Cleanup(func() { s.stop.Store(true) })
	return s
}

func (s *sniffer) pick(r *mathrand.Rand) captured {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		return captured{}
	}
	return s.got[r.IntN(len(s.got))]
}

// flood sends count datagrams at rate per second from a socket of its own in ns to the ports at
// addr, made from what sn captured; it returns how many it sent and how many datagrams came back.
func (e *labEnv) flood(ns string, addr netip.Addr, ports []int, sn *sniffer, count, rate int, seed uint64) (sent, answered int) {
	e.t.Helper()
	var c *net.UDPConn
	if err := e.l.Do(ns, func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: addr.AsSlice()})
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	var back atomic.Int64
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			back.Add(1)
		}
	}()
	rng := mathrand.New(mathrand.NewPCG(seed, 3))
	start := time.Now()
	for sent < count {
		if want := int(time.Since(start).Seconds() * float64(rate)); sent >= want {
			time.Sleep(time.Millisecond)
			continue
		}
		cp := sn.pick(rng)
		real, port := cp.b, ports[rng.IntN(len(ports))]
		if cp.b != nil && rng.IntN(4) != 0 {
			port = cp.port // mostly to the lane it was captured on, where it passes the header check
		}
		var b []byte
		switch kind := rng.IntN(4); {
		case kind == 0 || real == nil:
			b = make([]byte, rng.IntN(1400))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		case kind == 1:
			b = real[:rng.IntN(len(real))]
		case kind == 2:
			b = append([]byte(nil), real...)
			for i := 16; i < len(b); i++ {
				b[i] = byte(rng.Uint32())
			}
		default:
			b = real
		}
		dst := &net.UDPAddr{IP: addr.AsSlice(), Port: port}
		if _, err := c.WriteToUDP(b, dst); err == nil {
			sent++
		}
	}
	time.Sleep(200 * time.Millisecond)
	return sent, int(back.Load())
}

func dropsTotal(m any) float64 {
	d, _ := m.(map[string]any)
	var n float64
	for _, k := range []string{"foreign", "auth_failures", "replays", "invalid", "early"} {
		v, _ := d[k].(float64)
		n += v
	}
	return n
}

func sumLanes(res map[string]any, key, field string) float64 {
	ls, _ := res[key].([]any)
	var n float64
	for _, l := range ls {
		v, _ := l.(map[string]any)[field].(float64)
		n += v
	}
	return n
}

// TestLabFlood: while a push runs, 20,000 datagrams (random, truncated, forged and replayed, at
// 10,000 a second) arrive at the four UDP ports of each end from a socket that is neither peer.
// The copy is intact; each end counts every one of them (foreign, authentication failure or
// replay; kernel receive-buffer overflows are the only slack) and both counts reach --json; the
// flooding socket gets nothing back; the receiver's CPU stays within a small factor of a clean
// copy's.
func TestLabFlood(t *testing.T) {
	e := startLab(t, 200e6, 20*time.Millisecond, 0)
	src, sum := randomFile(t, t.TempDir(), "f.bin", 128<<20)
	clean := e.copy("--rate", "150M", src, e.srv.Host+":clean.bin")
	if clean.code != 0 || clean.res["blake3"] != sum {
		t.Fatalf("clean copy: exit %d: %s", clean.code, clean.stderr)
	}
	r := e.startCopy("--rate", "150M", src, e.srv.Host+":flood.bin")
	var sPorts, cPorts []int
	if !waitFor(20*time.Second, func() bool {
		sPorts, cPorts = e.udpPorts(e.l.NSB, "farwing-"), e.udpPorts(e.l.NSA, "farwing")
		return len(sPorts) == 4 && len(cPorts) == 4 && len(partials(e.srv.Home)) > 0
	}) {
		t.Fatalf("the copy's lanes never appeared (server %v, client %v): %s", sPorts, cPorts, r.errb.String())
	}
	snS, snC := e.sniff(e.l.NSB, sPorts), e.sniff(e.l.NSA, cPorts)
	time.Sleep(300 * time.Millisecond) // something to replay
	const count, rate = 20000, 10000
	var toServer, toClient, backS, backC int
	var wg sync.WaitGroup
	wg.Go(func() { toServer, backS = e.flood(e.l.NSB, e.l.AddrB, sPorts, snS, count, rate, 1) })
	wg.Go(func() { toClient, backC = e.flood(e.l.NSA, e.l.AddrA, cPorts, snC, count, rate, 2) })
	wg.Wait()
	if code := r.wait(60 * time.Second); code != 0 {
		t.Fatalf("flooded copy: exit %d: %s", code, r.errb.String())
	}
	_, res := jsonEvents(t, r.out.String())
	if res["blake3"] != sum || fileSum(t, e.srv.Home+"/flood.bin") != sum {
		t.Fatalf("flooded copy: digest %v, want %s", res["blake3"], sum)
	}
	if backS != 0 || backC != 0 {
		t.Errorf("the flooder was answered: %d datagrams from the server's ports, %d from the client's", backS, backC)
	}
	server, client := dropsTotal(res["peer_drops"]), dropsTotal(res["drops"])
	sOver, cOver := sumLanes(res, "peer_lanes", "rx_dropped"), sumLanes(res, "lanes", "rx_dropped")
	for _, c := range []struct {
		end              string
		sent             int
		counted, overrun float64
	}{{"server", toServer, server, sOver}, {"client", toClient, client, cOver}} {
		if c.counted > float64(c.sent) || c.counted+c.overrun < float64(c.sent) {
			t.Errorf("%s: %d flood datagrams sent, %.0f counted (+ %.0f receive-buffer overflows)", c.end, c.sent, c.counted, c.overrun)
		}
	}
	cpuClean, _ := clean.res["peer_cpu_seconds"].(float64)
	cpuFlood, _ := res["peer_cpu_seconds"].(float64)
	t.Logf("flood: %d datagrams to the server (counted %.0f: %v; overflows %.0f), %d to the client (counted %.0f: %v; overflows %.0f); receiver CPU %.2f s clean, %.2f s flooded (%.2fx); goodput %.0f vs %.0f Mbit/s",
		toServer, server, res["peer_drops"], sOver, toClient, client, res["drops"], cOver, cpuClean, cpuFlood, cpuFlood/cpuClean,
		res["goodput_bps"].(float64)/1e6, clean.res["goodput_bps"].(float64)/1e6)
	if cpuClean > 0 && cpuFlood > 3*cpuClean {
		t.Errorf("the receiver's CPU: %.2f s flooded against %.2f s clean", cpuFlood, cpuClean)
	}

}
