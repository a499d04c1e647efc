// Package hostinfo gathers the facts about one end that a bench ledger records, so that a third
// party can tell what the figures were measured on: CPU, memory, kernel, TCP settings, the MTU of
// the route to the other end, the load, the programs' versions, the CPU features that matter.
package hostinfo

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/cpu"
)

// Facts are one end's facts. Strings from the other end are cut to MaxText bytes (Clean).
type Facts struct {
	Hostname  string     `json:"hostname"`
	OS        string     `json:"os"`
	Arch      string     `json:"arch"`
	Kernel    string     `json:"kernel,omitempty"`
	CPU       string     `json:"cpu,omitempty"`
	Cores     int        `json:"cores"`
	MemBytes  int64      `json:"mem_bytes,omitempty"`
	Load      [3]float64 `json:"load"` // 1, 5 and 15 minute load average when gathered
	TCP       TCP        `json:"tcp"`
	Interface string     `json:"interface,omitempty"` // of the route to the other end
	MTU       int        `json:"mtu,omitempty"`
	OpenSSH   string     `json:"openssh,omitempty"` // the ssh client (client end) or sshd (server end)
	Farwing   string     `json:"farwing,omitempty"` // version
	SHA256    string     `json:"farwing_sha256,omitempty"`
	Go        string     `json:"go"`
	At        time.Time  `json:"at"`
	// CPUFlags are the instructions Farwing's sealing and hashing use, of those the CPU has
	// (CPUFeatures).
	CPUFlags []string `json:"cpu_flags,omitempty"`
}

// CPUFeatures lists the instructions that matter to Farwing's speed that this CPU has: AES-GCM
// in hardware needs "aes" and "pclmulqdq" (x86) or "aes" and "pmull" (arm64); the AVX-512 sealing
// path (internal/aesgcm) needs "avx512f", "avx512bw", "avx512vl", "avx512vaes",
// "avx512vpclmulqdq" and "bmi2"; BLAKE3
// uses "avx2" and "avx512f".
func CPUFeatures() []string {
	var out []string
	add := func(have bool, name string) {
		if have {
			out = append(out, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := cpu.X86
		add(x.HasAES, "aes")
		add(x.HasPCLMULQDQ, "pclmulqdq")
		add(x.HasAVX2, "avx2")
		add(x.HasBMI2, "bmi2")
		add(x.HasAVX512F, "avx512f")
		add(x.HasAVX512BW, "avx512bw")
		add(x.HasAVX512VL, "avx512vl")
		add(x.HasAVX512VAES, "avx512vaes") // VAES with AVX-512 (Zen 3 has VAES without it)
		add(x.HasAVX512VPCLMULQDQ, "avx512vpclmulqdq")
	case "arm64":
		add(cpu.ARM64.HasAES, "aes")
		add(cpu.ARM64.HasPMULL, "pmull")
	}
	return out
}

// TCP are the kernel's TCP settings that bound a stream's rate.
type TCP struct {
	Default   string   `json:"default_cc,omitempty"`
	Available []string `json:"available_cc,omitempty"`
	Rmem      [3]int64 `json:"tcp_rmem"` // min, default, max bytes
	Wmem      [3]int64 `json:"tcp_wmem"`
	RmemMax   int64    `json:"rmem_max"`
	WmemMax   int64    `json:"wmem_max"`
}

// MaxText bounds every string of a peer's facts.
const MaxText = 256

// SSHD is the command whose first line names this host's OpenSSH server: Gather's ssh on the
// remote peer.
func SSHD() []string {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			return []string{p, "-V"}
		}
	}
	return []string{"ssh", "-V"}
}

// Gather returns this end's facts; peer, when valid, is the other end's address (for the MTU of
// the route to it), ssh the OpenSSH program whose version to record (ssh or sshd), version
// farwing's own.
func Gather(peer netip.Addr, ssh []string, version string) Facts {
	f := Facts{OS: runtime.GOOS, Arch: runtime.GOARCH, Cores: runtime.NumCPU(), Go: runtime.Version(), Farwing: version, At: time.Now().UTC()}
	f.Hostname, _ = os.Hostname()
	f.Kernel = strings.TrimSpace(read("/proc/sys/kernel/osrelease"))
	f.CPU = cpuModel(read("/proc/cpuinfo"))
	f.MemBytes = memTotal(read("/proc/meminfo"))
	f.Load = Load()
	f.TCP = TCP{Default: strings.TrimSpace(read("/proc/sys/net/ipv4/tcp_congestion_control")),
		Available: strings.Fields(read("/proc/sys/net/ipv4/tcp_available_congestion_control")),
		Rmem:      triple(read("/proc/sys/net/ipv4/tcp_rmem")), Wmem: triple(read("/proc/sys/net/ipv4/tcp_wmem")),
		RmemMax: num(read("/proc/sys/net/core/rmem_max")), WmemMax: num(read("/proc/sys/net/core/wmem_max"))}
	if peer.IsValid() {
		f.Interface, f.MTU = routeMTU(peer)
	}
	if len(ssh) > 0 {
		f.OpenSSH = sshVersion(ssh)
	}
	f.SHA256 = exeHash()
	f.CPUFlags = CPUFeatures()
	return f
}

// exeHash is the SHA-256 of the running executable (hex), computed once: facts are gathered
// before every run.
var exeHash = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	file, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
})

// Load is the load average now.
func Load() [3]float64 {
	var l [3]float64
	for i, s := range strings.Fields(read("/proc/loadavg")) {
		if i >= 3 {
			break
		}
		l[i], _ = strconv.ParseFloat(s, 64)
	}
	return l
}

// Clean bounds and sanitises facts that came from the other end: every string valid UTF-8 and at
// most MaxText bytes, lists at most 32 entries.
func (f *Facts) Clean() {
	for _, s := range []*string{&f.Hostname, &f.OS, &f.Arch, &f.Kernel, &f.CPU, &f.Interface, &f.OpenSSH, &f.Farwing, &f.SHA256, &f.Go, &f.TCP.Default} {
		*s = Clip(*s)
	}
	if len(f.TCP.Available) > 32 {
		f.TCP.Available = f.TCP.Available[:32]
	}
	for i := range f.TCP.Available {
		f.TCP.Available[i] = Clip(f.TCP.Available[i])
	}
	if len(f.CPUFlags) > 32 {
		f.CPUFlags = f.CPUFlags[:32]
	}
	for i := range f.CPUFlags {
		f.CPUFlags[i] = Clip(f.CPUFlags[i])
	}
}

// Clip makes s valid UTF-8 of at most MaxText bytes.
func Clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	for len(s) > MaxText {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

func read(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	return string(b)
}

func cpuModel(cpuinfo string) string {
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotal(meminfo string) int64 { return memField(meminfo, "MemTotal:") }

// MemAvailable is the memory the kernel reckons is available to programs now, page cache that it
// can drop included (bytes; 0 where /proc/meminfo does not say).
func MemAvailable() int64 { return memField(read("/proc/meminfo"), "MemAvailable:") }

// memField returns a /proc/meminfo field in bytes (0 when absent).
func memField(meminfo, name string) int64 {
	for _, l := range strings.Split(meminfo, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == name {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func triple(s string) [3]int64 {
	var t [3]int64
	for i, f := range strings.Fields(s) {
		if i >= 3 {
			break
		}
		t[i], _ = strconv.ParseInt(f, 10, 64)
	}
	return t
}

func num(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

// routeMTU finds the interface the kernel would use to reach peer (a connected UDP socket sends
// nothing) and its MTU.
func routeMTU(peer netip.Addr) (string, int) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(peer, 9)))
	if err != nil {
		return "", 0
	}
	local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	c.Close()
	ifs, err := net.Interfaces()
	if err != nil {
		return "", 0
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == local {
				return ifc.Name, ifc.MTU
			}
		}
	}
	return "", 0
}

// sshVersion runs argv (e.g. ssh -V) and returns the first line it prints.
func sshVersion(argv []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	lines := strings.Split(string(out), "\n")
	for _, l := range lines { // sshd has no -V before OpenSSH 9.8: it names itself among its usage
		if strings.HasPrefix(strings.TrimSpace(l), "OpenSSH") {
			return Clip(strings.TrimSpace(l))
		}
	}
	return Clip(strings.TrimSpace(lines[0]))
}
