package simnet

import (
	"fmt"
	"testing"
	"time"
)

// TestSeededStartup checks STARTUP seeded with a packet-train estimate that is right, low or high
// (400 Mbit/s, 140 ms, 1 BDP drop-tail queue, 0 and 3 % loss): within a factor of two either way
// nothing overflows the queue and the first 3 s carry most of the capacity; far too high an
// estimate still ends in a working transfer. Unseeded STARTUP is the reference.
func TestSeededStartup(t *testing.T) {
	C := 400 * mbit
	first := func(loss, f float64) *Result {
		return run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Loss: loss,
			Duration: 3 * time.Second, Warmup: time.Nanosecond, ProbeBps: f * C})
	}
	for _, loss := range []float64{0, 0.03} {
		ref := first(loss, 0).MeanGoodput(0, 3*time.Second)
		for _, f := range []float64{0.1, 0.5, 0.8, 1, 1.3, 2, 4} {
			t.Run(fmt.Sprintf("loss=%g/seed=%gC", loss, f), func(t *testing.T) {
				r := first(loss, f)
				g1, g3 := r.MeanGoodput(0, time.Second), r.MeanGoodput(0, 3*time.Second)
				t.Logf("goodput 0-1 s %.0f Mbit/s, 0-3 s %.0f (unseeded %.0f); queue drops %d", g1/mbit, g3/mbit, ref/mbit, r.QueueDrops)
				if g3 <= ref {
					t.Errorf("seeded 0-3 s goodput %.0f Mbit/s not above unseeded %.0f", g3/mbit, ref/mbit)
				}
				if f > 2 {
					return
				}
				if r.QueueDrops != 0 {
					t.Errorf("%d queue drops", r.QueueDrops)
				}
				want := 0.85
				if f < 0.5 {
					want = 0.65
				}
				if g3 < want*C {
					t.Errorf("0-3 s goodput %.0f Mbit/s < %.0f %% of C", g3/mbit, 100*want)
				}
			})
		}
	}
}
