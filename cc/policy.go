package cc

import (
	"fmt"
	"strings"
)

// Policy selects how the controller trades its own throughput against other traffic (FASP's
// transfer policies).
type Policy int

const (
	// Fair is the default: LTRC as designed, one flow's share at a shared bottleneck.
	Fair Policy = iota
	// High tolerates more excess loss (LOSS_EXCESS 4 %) and cuts less on it (beta 0.85).
	High
	// Fixed holds Config.MaxRate regardless of loss, delay or feedback (it still measures).
	Fixed
	// Low is a scavenger: it reacts to a 5 ms standing queue and never enters competitive mode.
	Low
)

func (p Policy) String() string {
	switch p {
	case Fair:
		return "fair"
	case High:
		return "high"
	case Fixed:
		return "fixed"
	case Low:
		return "low"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses "fair", "high", "fixed" or "low" (case-insensitive).
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fair", "":
		return Fair, nil
	case "high":
		return High, nil
	case "fixed":
		return Fixed, nil
	case "low":
		return Low, nil
	}
	return Fair, fmt.Errorf("cc: unknown policy %q (want fair, high, fixed or low)", s)
}

// Mode is the controller's top-level state.
type Mode int

const (
	Startup Mode = iota
	Drain
	ProbeBW
	ProbeRTT
)

func (m Mode) String() string {
	switch m {
	case Startup:
		return "STARTUP"
	case Drain:
		return "DRAIN"
	case ProbeBW:
		return "PROBE_BW"
	case ProbeRTT:
		return "PROBE_RTT"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Phase is the PROBE_BW sub-state (meaningful only in ProbeBW).
type Phase int

const (
	Down Phase = iota
	Cruise
	Refill
	Up
)

func (p Phase) String() string {
	switch p {
	case Down:
		return "DOWN"
	case Cruise:
		return "CRUISE"
	case Refill:
		return "REFILL"
	case Up:
		return "UP"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}
