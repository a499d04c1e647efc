package units

import "testing"

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"300M": 300e6, "1.5G": 1.5e9, "750k": 750e3, "400Mbit": 400e6, "10Gbps": 10e9, "1e9": 1e9, " 2T ": 2e12,
	} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-5M", "0", "M"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	if s := Rate(362.4e6); s != "362.4 Mbit/s" {
		t.Errorf("Rate: %q", s)
	}
	if s := Rate(11.5e9); s != "11.50 Gbit/s" {
		t.Errorf("Rate: %q", s)
	}
	if s := Size(256 << 20); s != "256.0 MiB" {
		t.Errorf("Size: %q", s)
	}
	if s := Size(512); s != "512 B" {
		t.Errorf("Size: %q", s)
	}
}

// TestRateForms: Rate and RateShort scale alike, each with its own suffix.
func TestRateForms(t *testing.T) {
	for _, c := range []struct {
		bps         float64
		rate, short string
	}{
		{0, "0 bit/s", "0"}, {999, "999 bit/s", "999"}, {1000, "1.0 kbit/s", "1.0K"}, {800e3, "800.0 kbit/s", "800.0K"},
		{400e6, "400.0 Mbit/s", "400.0M"}, {999.9e6, "999.9 Mbit/s", "999.9M"}, {2.5e9, "2.50 Gbit/s", "2.50G"}, {11.5e9, "11.50 Gbit/s", "11.50G"},
	} {
		if got := Rate(c.bps); got != c.rate {
			t.Errorf("Rate(%g) = %q, want %q", c.bps, got, c.rate)
		}
		if got := RateShort(c.bps); got != c.short {
			t.Errorf("RateShort(%g) = %q, want %q", c.bps, got, c.short)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"20G": 20 << 30, "256M": 256 << 20, "1.5GiB": 3 << 29, "4096": 4096, "64 KiB": 64 << 10, "105.0 MiB": 105 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if got, _ := ParseSize(Size(want)); got != want && want >= 1<<20 {
			t.Errorf("ParseSize(Size(%d)) = %d", want, got)
		}
	}
	for _, bad := range []string{"", "x", "-5M", "1Q"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseLinkRate(t *testing.T) {
	for in, want := range map[string]float64{
		"100M": 100e6, "1.5G": 1.5e9, "800k": 800e3, "100Mbit": 100e6, "100mbps": 100e6,
		"2500": 2500, "0": 0, "unlimited": 0,
	} {
		got, err := ParseLinkRate(in)
		if err != nil || got != want {
			t.Errorf("ParseLinkRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1M", "M"} {
		if _, err := ParseLinkRate(in); err == nil {
			t.Errorf("ParseLinkRate(%q) succeeded", in)
		}
	}
}

func TestParseLoss(t *testing.T) {
	for in, want := range map[string]float64{"1%": 0.01, "0.01": 0.01, "0": 0, "12.5%": 0.125, "1": 1} {
		got, err := ParseLoss(in)
		if err != nil || got < want-1e-12 || got > want+1e-12 {
			t.Errorf("ParseLoss(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1%", "101%", "2"} {
		if _, err := ParseLoss(in); err == nil {
			t.Errorf("ParseLoss(%q) succeeded", in)
		}
	}
}
