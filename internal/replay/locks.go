package replay

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
)

// AppName is the application_name of a replay's sessions: a DBA sees
// them for what they are, and the lock sampler finds them.
const AppName = "pgmedic replay"

// LockSampler polls pg_stat_activity, on a connection of its own, for the
// replay's sessions that wait on a lock, and adds the interval to the
// shape of the statement each is running. A wait shorter than the
// interval may be missed; a long one is measured to within it.
type LockSampler struct {
	Connect func(ctx context.Context) (*pgconn.PgConn, error)
	Every   time.Duration
	// Err is why sampling stopped early, if it did.
	Err error

	wg     sync.WaitGroup
	cancel context.CancelFunc
	waits  map[int32]float64
}

func (l *LockSampler) start(ctx context.Context, w *capture.Workload) {
	byText := map[string]int32{}
	for _, s := range w.Sessions {
		for _, st := range s.Statements {
			byText[st.SQL] = st.Shape
		}
	}
	every := l.Every
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.waits = map[int32]float64{}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		conn, err := l.Connect(ctx)
		if err != nil {
			l.Err = err
			return
		}
		defer conn.Close(context.Background())
		q := "SELECT query FROM pg_stat_activity WHERE application_name = '" + AppName + "' AND wait_event_type = 'Lock'"
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			res, err := conn.Exec(ctx, q).ReadAll()
			if err != nil {
				if ctx.Err() == nil {
					l.Err = err
				}
				return
			}
			for _, r := range res {
				for _, row := range r.Rows {
					if shape, ok := byText[string(row[0])]; ok {
						l.waits[shape] += every.Seconds() * 1000
					}
				}
			}
		}
	}()
}

// stop ends sampling and returns the lock wait by shape, in ms.
func (l *LockSampler) stop() map[int32]float64 {
	l.cancel()
	l.wg.Wait()
	return l.waits
}
