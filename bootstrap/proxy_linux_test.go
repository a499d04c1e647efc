package bootstrap

import (
	"bytes"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProxy: the proxy's socket asks for bbr, and bytes go both ways intact until each side ends.
func TestProxy(t *testing.T) {
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control"); !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " bbr ") && os.Geteuid() != 0 {
		t.Skip("the kernel does not let this user choose bbr")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // an upper-casing echo server
		c, err := l.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c)
		c.Write(bytes.ToUpper(b))
		c.Close()
	}()
	host, port, _ := net.SplitHostPort(l.Addr().String())
	c, err := dialBBR(host, port)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := c.SyscallConn()
	var cc string
	raw.Control(func(fd uintptr) { cc, err = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	c.Close()
	if err != nil || strings.TrimRight(cc, "\x00") != "bbr" {
		t.Fatalf("the proxy's socket uses %q (%v), want bbr", cc, err)
	}
	go func() { // dialBBR's probe connection above was the first Accept; serve the proxy's too
		c, err := l.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c)
		c.Write(bytes.ToUpper(b))
		c.Close()
	}()
	var out bytes.Buffer
	msg := strings.Repeat("ssh bytes ", 100000)
	if err := Proxy(host, port, strings.NewReader(msg), &out); err != nil || out.String() != strings.ToUpper(msg) {
		t.Fatalf("through the proxy: %d bytes back (want %d), %v", out.Len(), len(msg), err)
	}
	if _, err := dialBBR("127.0.0.1", "1"); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Fatalf("a refused connection reads %v", err)
	}
}
