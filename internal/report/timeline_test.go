package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestTimelineSVG holds the drawn timeline to a golden file: every lane
// (ten activities, so two fold into "other"; a lock queue and its head; a
// pool's waits; two triggers), the judged stretch and a gap.
func TestTimelineSVG(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tl := &model.Timeline{From: at, To: at.Add(12 * time.Second), PoolsSampled: true,
		Judged: &model.Span{From: at.Add(2 * time.Second), To: at.Add(9 * time.Second), Note: "the stretch the rules read"},
		Gaps:   []model.Span{{From: at.Add(5 * time.Second), To: at.Add(6 * time.Second), Note: "reconnecting"}},
		Fired: []model.FiredSpan{{Kind: "lock-queue", From: at.Add(3 * time.Second), To: at.Add(8 * time.Second)},
			{Kind: "pool-waits", From: at.Add(4 * time.Second), To: at.Add(4 * time.Second)}}}
	for i := 0; i < 12; i++ {
		tk := model.TimelineTick{At: at.Add(time.Duration(i) * time.Second), Sessions: map[string]int{}}
		for k := 0; k < 10; k++ {
			tk.Sessions[fmt.Sprintf("LWLock/W%d", k)] = (i + k) % 4
		}
		tk.Sessions["CPU"] = i % 5
		tk.Sessions["idle in transaction"] = 1
		if i >= 3 && i <= 8 {
			tk.LockWaiters, tk.HeadQueue = i-2, i-2
			tk.Head = &model.Backend{PID: 4242, State: "idle in transaction", WaitType: "Client", Wait: "ClientRead", Query: "UPDATE accounts SET balance = balance - $1\n WHERE id = $2"}
			tk.PoolWaiting, tk.PoolMaxWaitMS = i, float64(100*i)
		}
		tl.Ticks = append(tl.Ticks, tk)
	}
	testkit.Golden(t, "testdata/timeline.svg.html", []byte(sessionsTimelineSVG(tl)))
}
