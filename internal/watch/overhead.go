package watch

import (
	"fmt"
	"time"
)

// OverheadLine says what watch did and what it cost: its own CPU per
// second of wall time (the target is under 1% of one core) and the time
// its queries took.
func OverheadLine(wall time.Duration, cpu float64, stats map[string]Stats) string {
	var ticks, incidents, reconnects int64
	var queryMS float64
	for _, s := range stats {
		ticks, incidents, reconnects, queryMS = ticks+s.Ticks, incidents+s.Incidents, reconnects+s.Reconnects, queryMS+s.QueryMS
	}
	perTick := 0.0
	if ticks > 0 {
		perTick = queryMS / float64(ticks)
	}
	secs := max(wall.Seconds(), 1e-9)
	return fmt.Sprintf("pgmedic watch: stopped after %s: %d ticks, %d incidents, %d reconnects; overhead: %.2f%% of one core (pgmedic's CPU, %.2f s), its queries %.2f ms a tick (%.2f%% of the time, round trips included)",
		wall.Round(time.Second), ticks, incidents, reconnects, 100*cpu/secs, cpu, perTick, 100*queryMS/1000/secs/float64(max(len(stats), 1)))
}
