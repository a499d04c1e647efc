package session

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Arrival offsets (µs) of 48-datagram trains (1500 IP bytes each) recorded in the lab at
// 400 Mbit/s with kernel receive times.
var labTrains = []struct {
	name    string
	arrival string
	want    float64 // Mbit/s; 0: no estimate
}{
	// Clumps of ~5 every ~150 µs: the link releases what is due each time it wakes.
	{"steady", "0 2 5 7 9 168 173 175 177 180 182 326 331 333 335 338 479 483 486 488 490 639 643 645 647 649 774 778 780 782 784 924 938 941 943 945 1074 1079 1081 1083 1085 1234 1248 1251 1254 1256 1258 1399", 400},
	// A late first clump of 16: first-to-last read 521 Mbit/s.
	{"late first clump", "0 2 4 6 8 10 13 15 17 20 22 24 26 28 30 32 176 180 182 185 187 332 337 339 341 343 471 476 478 480 482 622 626 628 630 632 769 773 776 778 780 916 921 923 925 927 1064 1067", 400},
	// One 1.9 ms stall: two clumps, first to last is all there is (an underestimate).
	{"two clumps", "0 10 13 15 17 1930 1934 1936 1939 1941 1943 1946 1948 1950 1952 1955 1957 1959 1961 1963 1985 1996 1998 2001 2003 2005 2007 2010 2012 2014 2016 2018 2020 2023 2025 2027 2029 2031 2033 2035 2037 2039 2041 2043 2045 2047 2049 2051", 275},
	// The whole train in 164 µs after a stall: no estimate rather than 3.5 Gbit/s.
	{"compressed", "0 13 16 18 20 23 25 28 30 53 56 58 60 63 65 67 69 72 74 78 80 83 96 99 101 104 109 111 114 116 119 122 124 127 129 135 137 139 142 144 146 148 151 153 155 158 160 164", 0},
	// Too few arrivals to trust.
	{"short", "0 30 60 90 120 150 180 210 240 270", 0},
}

func TestTrainRate(t *testing.T) {
	for _, tc := range labTrains {
		var at []time.Duration
		var size []int
		for _, f := range strings.Fields(tc.arrival) {
			us, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Duration(us)*time.Microsecond)
			size = append(size, 1500)
		}
		got := trainRate(at, size) / 1e6
		if tc.want == 0 {
			if got != 0 {
				t.Errorf("%s: %.0f Mbit/s, want no estimate", tc.name, got)
			}
			continue
		}
		if math.Abs(got-tc.want) > 0.1*tc.want {
			t.Errorf("%s: %.0f Mbit/s, want %.0f ± 10 %%", tc.name, got, tc.want)
		}
	}
	// Evenly spaced arrivals (a smooth link, every gap a clump of its own or none) give the rate.
	for _, rate := range []float64{20e6, 100e6, 400e6, 1e9} {
		gap := time.Duration(1500 * 8 / rate * 1e9)
		at := make([]time.Duration, trainLen)
		size := make([]int, trainLen)
		for i := range at {
			at[i], size[i] = time.Duration(i)*gap, 1500
		}
		if got := trainRate(at, size); math.Abs(got-rate) > 0.01*rate {
			t.Errorf("even spacing at %.0f Mbit/s: %.0f", rate/1e6, got/1e6)
		}
	}
}

// The estimate is the median of the trains' windows of 48 arrivals: a window that came in
// compressed (seen on the lab: 46 arrivals in 246 µs at 400 Mbit/s, read as 2,157 Mbit/s) or
// stretched (a stall inside it) does not set it.
func TestTrainsEstimate(t *testing.T) {
	fill := func(rx *trainRx, k int, arrivals string) {
		base := 0
		for _, l := range trainLens[:k] {
			base += l
		}
		for j, f := range strings.Fields(arrivals) {
			us, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			rx.add(base+j, time.Duration(us)*time.Microsecond, 1500)
		}
	}
	const compressed = "0 4 10 15 19 19 60 65 69 75 79 84 90 90 100 104 109 113 118 123 127 127 136 141 146 151 156 160 166 166 179 185 189 193 198 202 209 209 219 223 227 231 237 242 246 246"
	steady := labTrains[0].arrival
	// long is a second train of four windows, each as windows, one after the other, 1.5 ms apart.
	long := func(windows ...string) string {
		var b strings.Builder
		for k, w := range windows {
			for _, f := range strings.Fields(w) {
				us, _ := strconv.Atoi(f)
				fmt.Fprintf(&b, "%d ", 3000+k*1500+us)
			}
		}
		return b.String()
	}
	stretched := labTrains[2].arrival // a 1.9 ms stall inside: 275 Mbit/s
	for _, c := range []struct {
		name         string
		first, later string
		want         float64 // Mbit/s
	}{
		{"compressed first", compressed, steady, 400},
		{"compressed later", steady, compressed, 400},
		{"one train timed", steady, "", 400},
		{"only the compressed one", compressed, "", 2157},
		{"none", "", "", 0},
		{"stretched first, long steady", stretched, long(steady, steady, steady, steady), 400},
		{"one stretched and one compressed window", stretched, long(steady, compressed, steady, steady), 400},
	} {
		var rx trainRx
		fill(&rx, 0, c.first)
		fill(&rx, 1, c.later)
		got := rx.rate() / 1e6
		if math.Abs(got-c.want) > 0.1*c.want || (c.want == 0 && got != 0) {
			t.Errorf("%s: %.0f Mbit/s, want %.0f", c.name, got, c.want)
		}
	}
}

// A train's arrivals are placed by their index: the second train's after the first's, anything
// beyond the trains or beyond a train's length dropped.
func TestTrainIndexes(t *testing.T) {
	var rx trainRx
	for i := range trainMax + 10 {
		rx.add(i, time.Duration(i)*time.Microsecond, 1500)
	}
	rx.add(0, 0, 1500) // a second copy of the first datagram: the first train is full
	if rx.n[0] != trainLens[0] || rx.n[1] != trainLens[1] {
		t.Fatalf("arrivals per train %v, want %v", rx.n, trainLens)
	}
	if rx.at[1][0] != time.Duration(trainLens[0])*time.Microsecond {
		t.Fatalf("the second train's first arrival is at %v", rx.at[1][0])
	}
}
