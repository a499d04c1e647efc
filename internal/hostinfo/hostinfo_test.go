package hostinfo

import (
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGather(t *testing.T) {
	f := Gather(netip.MustParseAddr("127.0.0.1"), []string{"sh", "-c", "echo OpenSSH_test, fake; echo second line"}, "v1")
	if f.Cores != runtime.NumCPU() || f.Farwing != "v1" || f.OpenSSH != "OpenSSH_test, fake" || len(f.SHA256) != 64 {
		t.Errorf("facts %+v", f)
	}
	if runtime.GOOS == "linux" {
		if f.Kernel == "" || f.MemBytes <= 0 || f.TCP.Rmem[2] <= 0 || f.TCP.Wmem[2] <= 0 || f.TCP.Default == "" {
			t.Errorf("linux facts missing: %+v", f)
		}
		if a := MemAvailable(); a <= 0 || a > f.MemBytes {
			t.Errorf("memory available %d bytes, of %d", a, f.MemBytes)
		}
		if f.MTU <= 0 || f.Interface == "" {
			t.Errorf("route to loopback: interface %q, MTU %d", f.Interface, f.MTU)
		}
	}
}

func TestClean(t *testing.T) {
	f := Facts{CPU: strings.Repeat("é", 300), Hostname: "a\xffb", TCP: TCP{Available: make([]string, 100)}}
	f.Clean()
	if len(f.CPU) > MaxText || !utf8.ValidString(f.CPU) || f.Hostname != "a?b" || len(f.TCP.Available) != 32 {
		t.Errorf("cleaned: %d bytes of CPU, hostname %q, %d ccs", len(f.CPU), f.Hostname, len(f.TCP.Available))
	}
}

// TestCPUFeatures: the features reported are those /proc/cpuinfo lists (x86 Linux), and Gather
// carries them.
func TestCPUFeatures(t *testing.T) {
	got := CPUFeatures()
	if f := Gather(netip.Addr{}, nil, "v"); strings.Join(f.CPUFlags, " ") != strings.Join(got, " ") {
		t.Errorf("Gather's flags %q, CPUFeatures %q", f.CPUFlags, got)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return
	}
	var flags []string
	for _, l := range strings.Split(read("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags = strings.Fields(v)
			break
		}
	}
	for _, name := range []string{"aes", "pclmulqdq", "avx2", "bmi2", "avx512f"} { // (cpuinfo's vaes is VAES without AVX-512 too)
		if slices.Contains(flags, name) != slices.Contains(got, name) {
			t.Errorf("%s: /proc/cpuinfo %v, CPUFeatures %v", name, slices.Contains(flags, name), slices.Contains(got, name))
		}
	}
}
