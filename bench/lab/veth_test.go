//go:build linux

package lab_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
)

// startVeth starts a veth lab, skipping where it cannot run, closes it when the test ends and
// checks that its namespaces went.
func startVeth(t *testing.T, cfg lab.Config) *lab.Lab {
	t.Helper()
	cfg.Veth = true
	var l *lab.Lab
	// Registered before labtest's Close, so it runs after it (cleanups run last first).
	t.Cleanup(func() {
		if l != nil {
			assertGone(t, l)
		}
	})
	l = labtest.Start(t, cfg)
	return l
}

// assertGone fails t if either of l's namespaces is still listed.
func assertGone(t *testing.T, l *lab.Lab) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{l.NSA, l.NSB} {
		if strings.Contains(string(out), ns) {
			t.Errorf("namespace %s still listed after Close:\n%s", ns, out)
		}
	}
}

// tcpOneWay sends size bytes over TCP from namespace from to a listener in namespace to, and
// returns what arrived.
func tcpOneWay(t *testing.T, l *lab.Lab, from, to string, toAddr string, size int) []byte {
	t.Helper()
	var ln net.Listener
	if err := l.Do(to, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(toAddr, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	var c net.Conn
	if err := l.Do(from, func() (err error) {
		c, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := bytes.Repeat([]byte("farwing veth "), size/13+1)[:size]
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.Close()
	b := <-got
	if !bytes.Equal(b, msg) {
		t.Errorf("TCP %s -> %s: received %d bytes, not the %d sent", from, to, len(b), len(msg))
	}
	return b
}

// TestVeth: the veth lab starts with no qdisc (unlimited), TCP and UDP pass both ways, the
// counters see the traffic, and Close leaves nothing behind.
func TestVeth(t *testing.T) {
	l := startVeth(t, lab.Config{})
	if !l.Veth {
		t.Fatal("Lab.Veth is false")
	}
	for _, ns := range []string{l.NSA, l.NSB} {
		out, err := exec.Command("tc", "-n", ns, "qdisc", "show", "dev", lab.DevName).CombinedOutput()
		if err != nil || strings.Contains(string(out), "htb") {
			t.Errorf("%s: tc qdisc show: %v %s; want no HTB without a rate", ns, err, out)
		}
		out, err = exec.Command("ip", "-n", ns, "-d", "link", "show", "dev", lab.DevName).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "mtu 1500") || !strings.Contains(string(out), "veth") {
			t.Errorf("%s: ip link: %v %s; want a veth with MTU 1500", ns, err, out)
		}
	}
	const size = 4 << 20
	tcpOneWay(t, l, l.NSA, l.NSB, l.AddrB.String(), size)
	tcpOneWay(t, l, l.NSB, l.NSA, l.AddrA.String(), size)

	// UDP both ways: an echo in B, 20 datagrams from A, each answered.
	a, b := udpPair(t, l)
	go udpEcho(b)
	buf := make([]byte, 2048)
	for i := range 20 {
		msg := []byte("udp " + strconv.Itoa(i))
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		a.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := a.Read(buf)
		if err != nil || !bytes.Equal(buf[:k], msg) {
			t.Fatalf("UDP echo %d: %q, %v", i, buf[:k], err)
		}
	}
	atob, btoa := l.Stats()
	t.Logf("A->B %+v\nB->A %+v", atob, btoa)
	if atob.Bytes < size || btoa.Bytes < size || atob.Packets == 0 || btoa.Packets == 0 {
		t.Errorf("counters A->B %d B, B->A %d B: want each over the %d bytes TCP sent that way", atob.Bytes, btoa.Bytes, size)
	}
}

var htbRate = regexp.MustCompile(`class htb 1:1 root .*\brate ([0-9.]+)([KMG]?)bit ceil ([0-9.]+)([KMG]?)bit`)

// wantRate checks that got, an HTB class's rate read back from tc, is what a path of ipBps in IP
// bytes needs: ipBps × 1514/1500 (HTB counts Ethernet frames), to the digits tc prints.
func wantRate(t *testing.T, what string, got, ipBps float64) {
	t.Helper()
	want := ipBps * 1514 / 1500
	if got < want*0.999 || got > want*1.001 {
		t.Errorf("%s: HTB class rate %.0f bit/s, want %.0f (%g of IP bytes)", what, got, want, ipBps)
	}
}

// htbClassRate reads the rate of lab0's HTB class 1:1 in namespace ns back from tc (0: none).
func htbClassRate(t *testing.T, ns string) float64 {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns, "class", "show", "dev", lab.DevName).CombinedOutput()
	if err != nil {
		t.Fatalf("tc class show: %v %s", err, out)
	}
	m := htbRate.FindStringSubmatch(string(out))
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
	if m[1] != m[3] || m[2] != m[4] {
		t.Errorf("%s: HTB ceil differs from its rate: %s", ns, out)
	}
	return v * mult[m[2]]
}

// TestVethRate: a rate is an HTB class on each sender's egress at that rate of IP bytes in
// full-size packets, with the asked bfifo; SetPath changes it,
// rate 0 removes it; and TCP still passes.
func TestVethRate(t *testing.T) {
	l := startVeth(t, lab.Config{
		AtoB: lab.Path{RateBps: 300e6, QueueBytes: 256 << 10},
		BtoA: lab.Path{RateBps: 1e9},
	})
	for _, c := range []struct {
		ns    string
		rate  float64
		queue string
	}{{l.NSA, 300e6, "bfifo 10: parent 1:1 limit 256Kb"}, {l.NSB, 1e9, ""}} {
		wantRate(t, c.ns, htbClassRate(t, c.ns), c.rate)
		out, err := exec.Command("tc", "-n", c.ns, "qdisc", "show", "dev", lab.DevName).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "qdisc htb 1: root") {
			t.Errorf("%s: qdiscs %v %s; want a root HTB", c.ns, err, out)
		}
		if c.queue != "" && !strings.Contains(string(out), c.queue) {
			t.Errorf("%s: qdiscs %s; want %q", c.ns, out, c.queue)
		}
	}
	if p := l.Path(lab.AtoB); p.RateBps != 300e6 || p.QueueBytes != 256<<10 {
		t.Errorf("Path(AtoB) = %+v", p)
	}
	tcpOneWay(t, l, l.NSA, l.NSB, l.AddrB.String(), 1<<20)

	l.SetPath(lab.AtoB, lab.Path{RateBps: 500e6})
	wantRate(t, "after SetPath to 500M", htbClassRate(t, l.NSA), 500e6)
	if out, _ := exec.Command("tc", "-n", l.NSA, "qdisc", "show", "dev", lab.DevName).CombinedOutput(); strings.Contains(string(out), "bfifo") {
		t.Errorf("after SetPath without a queue: %s; want the bfifo gone", out)
	}
	l.SetPath(lab.BtoA, lab.Path{})
	if got := htbClassRate(t, l.NSB); got != 0 {
		t.Errorf("after SetPath to unlimited: HTB class rate %g, want none", got)
	}
	tcpOneWay(t, l, l.NSB, l.NSA, l.AddrA.String(), 1<<20)

	// What the kernel path cannot do is refused, the path left as it was.
	if err := l.Set(lab.AtoB, lab.Path{RateBps: 100e6, Delay: 10 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "netem") {
		t.Errorf("Set with a delay: %v; want a refusal naming netem", err)
	}
	wantRate(t, "after a refused Set", htbClassRate(t, l.NSA), 500e6)
}

// TestVethRefuses: a veth lab asked for a delay, random loss, a UDP or TCP block does not start, and
// leaves no namespace behind.
func TestVethRefuses(t *testing.T) {
	if err := lab.CheckVeth(); err != nil {
		t.Skipf("skipping veth lab test: %v", err)
	}
	before, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	for name, p := range map[string]lab.Path{
		"delay":    {Delay: 5 * time.Millisecond},
		"loss":     {Loss: 0.01},
		"drop-udp": {DropUDP: true},
		"drop-tcp": {DropTCP: lab.Ports{Lo: 45000, Hi: 45009}},
		"queue":    {QueueBytes: 1 << 20},
	} {
		l, err := lab.Start(lab.Config{AtoB: p, Veth: true})
		if err == nil {
			l.Close()
			t.Errorf("%s: a veth lab started with %+v", name, p)
			continue
		}
		if !strings.Contains(err.Error(), "veth path has no") {
			t.Errorf("%s: %v; want it to say what the veth path has not", name, err)
		}
	}
	after, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	mine := fmt.Sprintf("fw-%d-", os.Getpid())
	if strings.Count(string(after), mine) > strings.Count(string(before), mine) {
		t.Errorf("namespaces after refused starts:\n%s\nbefore:\n%s", after, before)
	}
}
