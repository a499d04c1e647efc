package fec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Block-failure targets (research/congestion-control.md §1.5, §2.4). A body group that fails costs
// one NAK round-trip while later groups keep flowing, so ~10 % failures minimise waste (2-3 %
// unused parity). A tail group that fails stalls the end of the file for a round-trip, so tail
// groups aim at 0.1 %.
const (
	BodyTarget = 0.10
	TailTarget = 0.001
)

// Plan returns the parity counts for groups of k data shards at random-loss rate loss: body is
// the smallest m (0..MaxBodyParity) with P(more than m of k+m shards lost) <= BodyTarget, tail
// the smallest (1..MaxTailParity) with that probability <= TailTarget; each is capped when no m
// reaches its target. loss is the random component only (the cc's loss baseline): congestion
// losses must never raise parity, since parity sent into a full queue only adds to it. The tail
// count includes the body's: send tail-body extra indices on the last groups of a file and before
// the sender goes idle.
//
// Tail protection is at least 1 even at loss 0: a baseline of 0 is an estimate from a few
// thousand packets, not proof of a lossless path, and one parity shard on the final groups turns
// a stray end-of-file loss from a NAK round-trip (>= one RTT plus the reorder window, during
// which the transfer is otherwise done) into nothing, for one shard per tail group.
//
// The loss model is i.i.d. (binomial), computed exactly in log space. Plan accepts any k >= 1
// (k < 1 counts as 1), so it also answers for k larger than a group may hold.
func Plan(loss float64, k int) (body, tail int) {
	k = max(k, 1)
	if !(loss > 0) { // also NaN
		return 0, 1
	}
	if loss >= 1 {
		return MaxBodyParity, MaxTailParity
	}
	body = minParity(loss, k, 0, MaxBodyParity, BodyTarget)
	tail = minParity(loss, k, 1, MaxTailParity, TailTarget)
	return body, tail
}

// BodyMix says how to mix two parity counts so that body groups of k data shards fail
// BodyTarget of the time on average, rather than at most: given m, Plan's body count for loss and
// k, the share of groups (0 ≤ fewer < 1) that may get m−1 instead. Counts are whole, so the smallest m that meets
// the target usually beats it by far and spends the difference on parity that is never used: at
// 1 % loss and 187 data shards, 4 shards leave 4.4 % of groups short and 3 leave 12.4 %; at 3 %,
// 9 leave 7.3 % and 8 leave 13.4 %. Giving m−1 to the share fewer = (target − f(m)) / (f(m−1) −
// f(m)) of the groups and m to the rest makes the expected failure exactly BodyTarget (70 % and
// 44 % of the groups in those two cases), with less parity on average: 3.3 and 8.6 shards. A
// failed body group costs a repair round trip while later groups keep flowing. fewer is 0 where
// m is 0, at the cap, or for a loss outside (0, 1).
func BodyMix(loss float64, k, m int) (fewer float64) {
	k = max(k, 1)
	if !(loss > 0 && loss < 1) || m <= 0 || m >= MaxBodyParity {
		return 0
	}
	hi := binomTail(k+m-1, loss, m-1) // m−1 shards: above the target
	lo := binomTail(k+m, loss, m)     // m shards: at or below it
	if !(hi > lo) {
		return 0
	}
	return min(max((BodyTarget-lo)/(hi-lo), 0), 0.999)
}

// minParity returns the smallest m in [lo, hi] with binomTail(k+m, p, m) <= target, or hi.
func minParity(p float64, k, lo, hi int, target float64) int {
	for m := lo; m < hi; m++ {
		if binomTail(k+m, p, m) <= target {
			return m
		}
	}
	return hi
}

// binomTail returns P(X > m) for X ~ Binomial(n, p), 0 < p < 1. Above the mode it sums the
// upper tail directly (no 1-CDF cancellation), starting from one log-space term and stepping
// with the term ratio until the terms stop mattering, so it costs O(m) even for groups of
// hundreds of shards; at or below the mode the tail is large and 1-CDF is accurate.
func binomTail(n int, p float64, m int) float64 {
	if m >= n {
		return 0
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	ln1, _ := math.Lgamma(float64(n + 1))
	term := func(j int) float64 {
		lj, _ := math.Lgamma(float64(j + 1))
		lnj, _ := math.Lgamma(float64(n - j + 1))
		return math.Exp(ln1 - lj - lnj + float64(j)*lp + float64(n-j)*lq)
	}
	if float64(m+1) <= float64(n+1)*p { // m+1 is at or below the mode
		cdf := 0.0
		for j := 0; j <= m; j++ {
			cdf += term(j)
		}
		return max(0, 1-cdf)
	}
	ratio := p / (1 - p)
	t := term(m + 1)
	sum := 0.0
	for j := m + 1; j <= n && t > 0; j++ {
		sum += t
		if t < sum*1e-17 {
			break
		}
		t *= float64(n-j) / float64(j+1) * ratio
	}
	return sum
}

// RepairCount returns how many fresh parity shards to send for a group that needs need more
// shards when a fraction loss of them will be lost again: ceil(need/(1-loss))
// (research/congestion-control.md §2.5). loss is clamped to [0, 0.5].
func RepairCount(need int, loss float64) int {
	if need <= 0 {
		return 0
	}
	if !(loss > 0) {
		return need
	}
	loss = min(loss, 0.5)
	// The epsilon keeps an exact quotient (need=97, loss=0.03) from rounding up a whole shard.
	return int(math.Ceil(float64(need)/(1-loss) - 1e-9))
}

// ModeKind says how a transfer chooses its parity.
type ModeKind uint8

const (
	ModeAuto  ModeKind = iota // a group per block, parity from Plan and the measured loss
	ModeOff                   // no proactive parity; losses are repaired by NAK and re-sending data
	ModeFixed                 // K data shards and M parity shards per group, whatever the loss
)

// Mode is the --fec setting. The zero Mode is auto, the default.
type Mode struct {
	Kind ModeKind
	K, M int // ModeFixed only
}

// ParseMode parses "off", "auto" or "K+M" (for example "10+2"; K 1..MaxK, M 0..MaxBodyParity).
func ParseMode(s string) (Mode, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "auto":
		return Mode{Kind: ModeAuto}, nil
	case "off":
		return Mode{Kind: ModeOff}, nil
	}
	ks, ms, ok := strings.Cut(t, "+")
	k, errK := strconv.Atoi(strings.TrimSpace(ks))
	m, errM := strconv.Atoi(strings.TrimSpace(ms))
	if !ok || errK != nil || errM != nil {
		return Mode{}, fmt.Errorf("fec mode %q: want off, auto or K+M such as 10+2", s)
	}
	if k < 1 || k > MaxK {
		return Mode{}, fmt.Errorf("fec mode %q: K must be 1..%d", s, MaxK)
	}
	if m < 0 || m > MaxBodyParity {
		return Mode{}, fmt.Errorf("fec mode %q: M must be 0..%d", s, MaxBodyParity)
	}
	return Mode{Kind: ModeFixed, K: k, M: m}, nil
}

// String returns the form ParseMode reads.
func (m Mode) String() string {
	switch m.Kind {
	case ModeOff:
		return "off"
	case ModeFixed:
		return strconv.Itoa(m.K) + "+" + strconv.Itoa(m.M)
	}
	return "auto"
}

// Set and Type make *Mode a pflag.Value, so a flag can be declared with FlagSet.Var.
func (m *Mode) Set(s string) error {
	v, err := ParseMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

func (*Mode) Type() string { return "mode" }
