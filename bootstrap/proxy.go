package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// ProxyCommand is the farwing subcommand that carries ssh's connection (ssh's ProxyCommand) over a
// TCP socket of its own that asks for BBR: with a loss-based congestion control (CUBIC, the
// default on most hosts) one TCP stream moves a few hundred kbit/s at 3 % loss, which is what
// installing the peer over ssh would get.
const ProxyCommand = "ssh-proxy"

// congestion reads one of the kernel's TCP congestion control settings (this network
// namespace's), "" where it cannot.
func congestion(name string) string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// plainHost says whether ssh may put name into a ProxyCommand: ssh runs the command with `sh -c`
// and puts %h into it as it is, unquoted (OpenSSH before 9.6 takes any host name from the
// command line, CVE-2023-51385), so farwing adds its own only for a name the shell reads as one
// word and nothing else: ASCII letters and digits, '.', '-', '_' (host names and aliases), ':' (an
// IPv6 address) and '%' (its zone: fe80::1%eth0), not starting with '-' (which ssh-proxy would
// read as a flag). No quote, space, '$', '`', ';', '&', '|', '<', '>', '(', ')', '\', '~',
// '*', '?', '[', ']', '{', '}', '#', '=' or '!': none of the shell's quoting, expansions, globs,
// comments or operators.
func plainHost(name string) bool {
	if name == "" || name[0] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_:%", c) >= 0) {
			return false
		}
	}
	return true
}

// bbrProxy is the ProxyCommand that makes ssh's own TCP connection to host ask for BBR, or "" and
// why not: only on Linux where the kernel's default is another and BBR may be chosen (the
// kernel's settings as congestion reads them), only where ssh would connect directly (the
// configuration for the host sets no ProxyCommand, ProxyJump, BindAddress, BindInterface or
// AddressFamily, which the proxy would not honour), and only where the host name (after a user@)
// and the HostName ssh -G gives for it are plain (plainHost): ssh would paste either into the
// command's shell line.
func (s SSH) bbrProxy(host string, cfg map[string]string, exe string, congestion func(name string) string) (cmd, why string) {
	if !s.BBR {
		return "", "--ssh-bbr=false"
	}
	if runtime.GOOS != "linux" || cfg == nil {
		return "", "not on Linux, or ssh -G said nothing"
	}
	if h := host[strings.LastIndexByte(host, '@')+1:]; !plainHost(h) || cfg["hostname"] != "" && !plainHost(cfg["hostname"]) {
		return "", "the host name has characters other than letters, digits and . - _ : %, which ssh would give a ProxyCommand's shell as they are"
	}
	def := congestion("tcp_congestion_control")
	if def == "" || def == "bbr" {
		return "", "the kernel's default congestion control is " + map[bool]string{true: "unknown", false: def}[def == ""]
	}
	may := congestion("tcp_allowed_congestion_control")
	if os.Geteuid() == 0 {
		may += " " + congestion("tcp_available_congestion_control")
	}
	if !strings.Contains(" "+may+" ", " bbr ") {
		return "", "the kernel does not offer bbr (tcp_allowed_congestion_control: " + congestion("tcp_allowed_congestion_control") + ")"
	}
	if s.Jump != "" {
		return "", "ssh goes through a jump host"
	}
	for _, k := range []string{"proxycommand", "proxyjump", "bindaddress", "bindinterface"} {
		if v := cfg[k]; v != "" && v != "none" {
			return "", "the ssh configuration sets " + k
		}
	}
	if af := cfg["addressfamily"]; af != "" && af != "any" {
		return "", "the ssh configuration sets addressfamily"
	}
	if exe == "" || strings.ContainsAny(exe, "%\n") {
		return "", "this program's path cannot be written in a ProxyCommand"
	}
	return shellQuote(exe) + " " + ProxyCommand + " %h %p", "the kernel's default congestion control is " + def
}

// Proxy connects to host:port over TCP asking for BBR (the kernel's default where it refuses)
// and copies between the connection and in/out until both directions end: ssh's ProxyCommand.
// Errors read as ssh's own would.
func Proxy(host, port string, in io.Reader, out io.Writer) error {
	tc, err := dialBBR(host, port)
	if err != nil {
		return err
	}
	go func() {
		io.Copy(tc, in)
		tc.CloseWrite()
	}()
	_, err = io.Copy(out, tc)
	tc.Close()
	return err
}

// dialBBR connects to host:port with a socket that asks for BBR before its SYN.
func dialBBR(host, port string) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = setBBR(fd) }); err != nil {
			return err
		}
		if serr != nil {
			fmt.Fprintf(os.Stderr, "farwing ssh-proxy: bbr refused (%v); using the kernel's default\n", serr)
		}
		return nil
	}}
	c, err := d.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		var dns *net.DNSError
		var errno syscall.Errno
		switch {
		case errors.As(err, &dns):
			return nil, fmt.Errorf("ssh: Could not resolve hostname %s: %v", host, dns.Err)
		case errors.As(err, &errno):
			m := errno.Error()
			return nil, fmt.Errorf("ssh: connect to host %s port %s: %s", host, port, strings.ToUpper(m[:1])+m[1:])
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, fmt.Errorf("ssh: connect to host %s port %s: Connection timed out", host, port)
		}
		return nil, fmt.Errorf("ssh: connect to host %s port %s: %v", host, port, err)
	}
	return c.(*net.TCPConn), nil
}
