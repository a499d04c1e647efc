package bench

import (
	"errors"
	"strings"
	"testing"
)

// TestCopySummary: the bench reads a copy's summary event, the last of its JSON lines, keeps the
// evidence fields of it, and takes a summary with an error, a last line that is not a summary and
// output that is not JSON lines as the copy's failure.
func TestCopySummary(t *testing.T) {
	good := `{"schema":1,"event":"start","version":"dev","direction":"push"}
{"schema":1,"event":"progress","bytes":10,"total":20}
{"schema":1,"event":"file","name":"a","size":20,"blake3":"ab"}
{"schema":1,"event":"summary","exit_code":0,"bytes":20,"goodput_bps":1e6,"blake3":"ab","files":[]}
`
	s := &Sample{Detail: map[string]any{}}
	res, err := copySummary([]byte(good), nil, s)
	if err != nil || res["bytes"] != float64(20) || s.Detail["goodput_bps"] != 1e6 || s.Detail["blake3"] != "ab" {
		t.Fatalf("summary %v, %v; detail %v", res, err, s.Detail)
	}
	if _, ok := s.Detail["event"]; ok {
		t.Errorf("the sample keeps the event's name: %v", s.Detail)
	}
	failed := `{"schema":1,"event":"start","version":"dev"}
{"schema":1,"event":"error","error":"farwing: no UDP","exit_code":6}
{"schema":1,"event":"summary","error":"farwing: no UDP","exit_code":6}
`
	if _, err := copySummary([]byte(failed), errors.New("exit status 6"), nil); err == nil || !strings.Contains(err.Error(), "exit status 6") {
		t.Errorf("failed copy: %v", err)
	}
	if _, err := copySummary([]byte(failed), nil, nil); err == nil || !strings.Contains(err.Error(), "no UDP") {
		t.Errorf("a summary with an error: %v", err)
	}
	for _, out := range []string{"", "not json\n", `{"schema":1,"event":"start"}` + "\n", `{"bytes":20}`, `{"schema":2,"event":"summary"}`} {
		if _, err := copySummary([]byte(out), nil, nil); err == nil || !strings.Contains(err.Error(), "no summary") {
			t.Errorf("%q: %v", out, err)
		}
	}
}

// TestSizingEstimate: a sizing copy's rate is its packet-train estimate or, where higher, its
// controller's delivery rate; a train that a stall stretched does not size the run.
func TestSizingEstimate(t *testing.T) {
	for _, c := range []struct {
		res  map[string]any
		want float64
	}{
		{map[string]any{"probe_bps": 8.6e6, "cc": map[string]any{"btlbw_bps": 4.3e8}}, 4.3e8},
		{map[string]any{"probe_bps": 4.0e8, "cc": map[string]any{"btlbw_bps": 3.5e8}}, 4.0e8},
		{map[string]any{"probe_bps": 4.0e8}, 4.0e8},
		{map[string]any{"cc": map[string]any{"btlbw_bps": "fast"}}, 0},
		{map[string]any{"probe_bps": -1.0}, 0},
		{map[string]any{}, 0},
	} {
		if got := sizingEstimate(c.res); got != c.want {
			t.Errorf("%v: %v, want %v", c.res, got, c.want)
		}
	}
}
