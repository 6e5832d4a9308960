package capture

import "testing"

// TestFailedCountsWhatTheApplicationSaw: failed statements the replay
// leaves out (logged without their values) still count as failed at
// capture, and are said apart.
func TestFailedCountsWhatTheApplicationSaw(t *testing.T) {
	w := &Workload{Failed: 3, Skipped: []Skip{{Reason: skipNoParams, Count: 84}, {Reason: skipOwn, Count: 5}}}
	if st := w.Stats(); st.Failed != 87 || st.FailedLeftOut != 84 {
		t.Fatalf("failed %d, left out %d; want 87 and 84", st.Failed, st.FailedLeftOut)
	}
}
