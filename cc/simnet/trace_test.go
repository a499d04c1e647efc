package simnet

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestTrace prints a controller trace for one scenario; it runs only when SIMTRACE is set, e.g.
//
//	SIMTRACE="rate=400e6 loss=0.03 seed=2" go test ./cc/simnet -run Trace -v
func TestTrace(t *testing.T) {
	spec := os.Getenv("SIMTRACE")
	if spec == "" {
		t.Skip("set SIMTRACE to run")
	}
	var rate, loss, bufBDP = 400e6, 0.0, 1.0
	var seed uint64 = 1
	var cross bool
	for _, f := range splitFields(spec) {
		var k, v string
		fmt.Sscanf(f, "%s", &k)
		if i := indexByte(f, '='); i > 0 {
			k, v = f[:i], f[i+1:]
		}
		switch k {
		case "rate":
			fmt.Sscan(v, &rate)
		case "loss":
			fmt.Sscan(v, &loss)
		case "buf":
			fmt.Sscan(v, &bufBDP)
		case "seed":
			fmt.Sscan(v, &seed)
		case "cubic":
			cross = true
		}
	}
	cfg := Config{Seed: seed, Rate: rate, RTT: baseRTT, Buffer: int(bufBDP * float64(bdpBytes(rate, baseRTT))), Loss: loss, Duration: 30 * time.Second}
	if cross {
		cfg.Cross = &Cross{}
	}
	r := Run(cfg)
	for i := 4; i < len(r.Goodput); i += 5 {
		s := r.Stats[i]
		t.Logf("t=%4.1f gp=%6.1f x=%6.1f pace=%6.1f btl=%6.1f hi=%6.1f lo=%6.1f %v/%v base=%.4f(%d) q=%v qmax=%.0fms cong=%d/%d compete=%v minrtt=%v",
			float64(i+1)/10, r.Goodput[i]/mbit, r.CrossGoodput[i]/mbit, s.PacingRate/mbit, s.BtlBw/mbit, s.BwHi/mbit, s.BwLo/mbit,
			s.Mode, s.Phase, s.LossBase, s.BaseSamples, s.QueueDelay, r.QueueMax[i]*1000, s.LossEvents, s.QueueEvents, s.Compete, s.MinRTT)
	}
}

func splitFields(s string) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if r == ' ' || r == ',' {
			if cur != "" {
				out = append(out, cur)
			}
			cur = ""
			continue
		}
		cur += string(r)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}
