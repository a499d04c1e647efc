package bootstrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBBRProxyChoice: the ProxyCommand is used only on a kernel whose default is not bbr but that
// offers it, and only where ssh would connect directly.
func TestBBRProxyChoice(t *testing.T) {
	kernel := map[string]string{"tcp_congestion_control": "cubic", "tcp_allowed_congestion_control": "reno cubic bbr",
		"tcp_available_congestion_control": "reno cubic bbr"}
	congestion := func(name string) string { return kernel[name] }
	direct := map[string]string{"hostname": "h", "addressfamily": "any"}
	on := SSH{BBR: true}
	if cmd, why := on.bbrProxy("h", direct, "/opt/my dir/farwing", congestion); cmd != `'/opt/my dir/farwing' ssh-proxy %h %p` {
		t.Fatalf("CUBIC default, direct ssh: %q (%s)", cmd, why)
	}
	for name, c := range map[string]struct {
		s   SSH
		cfg map[string]string
		exe string
	}{
		"turned off":        {SSH{}, direct, "/f"},
		"no ssh -G":         {on, nil, "/f"},
		"ProxyCommand set":  {on, map[string]string{"proxycommand": "nc %h %p"}, "/f"},
		"ProxyJump set":     {on, map[string]string{"proxyjump": "j"}, "/f"},
		"-J":                {SSH{BBR: true, Jump: "j"}, direct, "/f"},
		"BindAddress set":   {on, map[string]string{"bindaddress": "10.0.0.1"}, "/f"},
		"AddressFamily set": {on, map[string]string{"addressfamily": "inet6"}, "/f"},
		"% in the path":     {on, direct, "/x%h/farwing"},
	} {
		if cmd, _ := c.s.bbrProxy("h", c.cfg, c.exe, congestion); cmd != "" {
			t.Errorf("%s: proxy %q used", name, cmd)
		}
	}
	kernel["tcp_congestion_control"] = "bbr"
	if cmd, _ := on.bbrProxy("h", direct, "/f", congestion); cmd != "" {
		t.Errorf("bbr default: proxy %q used", cmd)
	}
	kernel["tcp_congestion_control"], kernel["tcp_allowed_congestion_control"], kernel["tcp_available_congestion_control"] = "cubic", "reno cubic", "reno cubic"
	if cmd, _ := on.bbrProxy("h", direct, "/f", congestion); cmd != "" {
		t.Errorf("no bbr in the kernel: proxy %q used", cmd)
	}
}

// TestBBRProxyHostNames (issue 37, second read): ssh puts %h into the ProxyCommand's `sh -c` line
// as it is (OpenSSH before 9.6 takes any host name), so farwing's own ProxyCommand is used only
// for a host name (less a user@) and a HostName from ssh -G made of letters, digits and . - _ : %:
// a name with the shell's quotes, expansions, globs or operators gets no proxy, as if the user's
// ssh connected directly, and never runs anything here. For every plain name, the shell hands
// ssh-proxy exactly the name and port.
func TestBBRProxyHostNames(t *testing.T) {
	kernel := map[string]string{"tcp_congestion_control": "cubic", "tcp_allowed_congestion_control": "reno cubic bbr"}
	congestion := func(name string) string { return kernel[name] }
	on := SSH{BBR: true}
	dir := t.TempDir()
	exe := filepath.Join(dir, "farwing")
	os.WriteFile(exe, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755)
	marker := filepath.Join(dir, "ran")
	for _, host := range []string{"$(touch " + marker + ")", "`touch " + marker + "`", "h;touch " + marker, "h&&touch " + marker,
		"h|touch " + marker, "h touch", "h\ttouch", "h\ntouch " + marker, "'h'", `"h"`, "h>" + marker, "h<x", "(h)", "{h,i}",
		"h*", "h?", "[h]", "~root", "h#x", "h=x", "!h", `h\x`, "-oProxyCommand=touch", "-h", "u@$(touch " + marker + ")", "hé"} {
		for _, c := range []struct{ host, hostname string }{{host, host}, {"alias", host}, {host, ""}} {
			cfg := map[string]string{"hostname": c.hostname}
			if cmd, _ := on.bbrProxy(c.host, cfg, exe, congestion); cmd != "" {
				t.Errorf("host %q, HostName %q: proxy %q used", c.host, c.hostname, cmd)
				// What ssh before 9.6 would run: %h pasted into the shell's line.
				sh := exec.Command("sh", "-c", strings.NewReplacer("%h", c.hostname, "%p", "22").Replace(cmd))
				sh.Dir = dir // what it makes stays in the test's directory
				sh.Run()
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a host name ran a command through the ProxyCommand's shell")
	}
	if plainHost("") {
		t.Error("an empty host name is plain")
	}
	for _, host := range []string{"example.com", "Web-01.example.com", "h_1", "10.0.0.1", "::1", "fe80::1%eth0", "2001:db8::42", "a.b.c.d-e_f:1%x"} {
		for _, user := range []string{"", "me@", "a@b@"} {
			cmd, why := on.bbrProxy(user+host, map[string]string{"hostname": host}, exe, congestion)
			if cmd == "" {
				t.Errorf("host %q: no proxy (%s)", user+host, why)
				continue
			}
			out, err := exec.Command("sh", "-c", strings.NewReplacer("%h", host, "%p", "22").Replace(cmd)).Output()
			if want := "ssh-proxy\n" + host + "\n22\n"; err != nil || string(out) != want {
				t.Errorf("host %q: the shell gave the proxy %q (%v), want %q", host, out, err, want)
			}
		}
	}
}
