package tuning

import "testing"

// TestSockets: FARWING_SOCKETS=portable, that value only, puts the lanes on the portable socket
// path (lane.Options.Portable), leaving the other switches alone; anything else keeps the default.
func TestSockets(t *testing.T) {
	for v, want := range map[string]bool{"": false, "portable": true, "Portable": false, "batched": false, "1": false} {
		s := FromEnv(env(map[string]string{"FARWING_SOCKETS": v}))
		o := s.Lane(7)
		if s.Portable != want || o.Portable != want || o.Buffer != 7 || o.DisableGSO || o.DisableGRO {
			t.Errorf("FARWING_SOCKETS=%q: settings %+v, lane options %+v", v, s, o)
		}
		if s.Portable = false; s != (Settings{}) {
			t.Errorf("FARWING_SOCKETS=%q changed another switch: %+v", v, s)
		}
	}
}
