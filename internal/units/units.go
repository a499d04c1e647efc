// Package units parses and prints the quantities users type and read: rates in bits per second
// (SI suffixes k, M, G, T) and sizes in bytes (printed with binary units).
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRate parses "300M", "1.5G", "750k", "400Mbit", "1e9" as bits per second.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	low := strings.ToLower(t)
	for _, suf := range []string{"bit/s", "bps", "bit", "b/s"} {
		if strings.HasSuffix(low, suf) {
			t = t[:len(t)-len(suf)]
			break
		}
	}
	v, err := parseScaled(t, 1000)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad rate %q: want a number of bits per second like 300M or 1.5G", s)
	}
	return v, nil
}

func parseScaled(t string, base float64) (float64, error) {
	if t == "" {
		return 0, fmt.Errorf("empty")
	}
	mult := 1.0
	switch t[len(t)-1] {
	case 'k', 'K':
		mult = base
	case 'm', 'M':
		mult = base * base
	case 'g', 'G':
		mult = base * base * base
	case 't', 'T':
		mult = base * base * base * base
	}
	if mult != 1 {
		t = t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, err
	}
	return v * mult, nil
}

// rateScale is how a rate is shown: its value in the unit chosen, the digits after the point, and
// the unit's SI prefix as an index (0: none, 1: kilo, 2: mega, 3: giga).
func rateScale(bps float64) (v float64, prec, prefix int) {
	switch {
	case bps >= 1e9:
		return bps / 1e9, 2, 3
	case bps >= 1e6:
		return bps / 1e6, 1, 2
	case bps >= 1e3:
		return bps / 1e3, 1, 1
	}
	return bps, 0, 0
}

// Rate formats bits per second for people: "362.4 Mbit/s", "11.50 Gbit/s".
func Rate(bps float64) string {
	v, prec, p := rateScale(bps)
	return strconv.FormatFloat(v, 'f', prec, 64) + " " + [...]string{"", "k", "M", "G"}[p] + "bit/s"
}

// RateShort formats bits per second as a number and an SI suffix, as rates are typed ("362.4M",
// "11.50G", "800.0K"): the lab's lines.
func RateShort(bps float64) string {
	v, prec, p := rateScale(bps)
	return strconv.FormatFloat(v, 'f', prec, 64) + [...]string{"", "K", "M", "G"}[p]
}

// Size formats bytes for people.
func Size(n int64) string {
	f := float64(n)
	switch {
	case f >= 1<<30:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	case f >= 1<<10:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ParseSize parses "20G", "256M", "1.5GiB", "4096", "64 KiB" as bytes, with binary multiples
// (k = 1024), as Size prints them.
func ParseSize(s string) (int64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	v, err := parseScaled(t, 1024)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q: want a number of bytes like 256M or 20G", s)
	}
	return int64(v), nil
}

// ParseLinkRate parses a link's rate in bits/s as ParseRate does ("100M", "1.5G", "800k", "100Mbit"); "0",
// "unlimited" and "inf" mean no limit (0).
func ParseLinkRate(s string) (float64, error) {
	switch t := strings.ToLower(strings.TrimSpace(s)); t {
	case "unlimited", "inf":
		return 0, nil
	default:
		if v, err := strconv.ParseFloat(t, 64); err == nil && v == 0 {
			return 0, nil
		}
	}
	return ParseRate(s)
}

// ParseLoss parses "1%" or "0.01".
func ParseLoss(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSuffix(t, "%"), 0.01
	}
	v, err := strconv.ParseFloat(t, 64)
	v *= scale
	if err != nil || v < 0 || v > 1 || v != v {
		return 0, fmt.Errorf("bad loss %q: want a probability like 1%% or 0.01", s)
	}
	return v, nil
}
