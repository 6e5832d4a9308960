// Package replay runs a captured workload against a server: one
// connection per captured session, each statement sent when its session
// sent it (scaled by the speed), and measures what the server did with it.
//
// A replay that falls behind has two possible reasons, and they call for
// opposite conclusions: the server was slow (a session's previous
// statement ended after this one was due, so the session could not send
// it on time, as the application could not have either), or the replayer
// was (it had the session free and still sent late). Each statement's
// lateness is split into those two parts and reported apart.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// Options bound and pace a replay.
type Options struct {
	// Speed scales the capture's pace: 1 as captured, 2 twice as fast,
	// 0 as fast as the server answers (each session still in order).
	Speed float64
	// MaxConnections bounds the sessions connected at once; a session
	// waits for a free slot (the wait is reported).
	MaxConnections int
	// Timeout bounds the whole replay; sessions still running then are
	// stopped (their statements counted as not run).
	Timeout time.Duration
	// StatementTimeout cancels a statement that runs longer (on the
	// server, by a cancel request); 0 leaves them to run.
	StatementTimeout time.Duration
	// Connect opens a session's connection.
	Connect func(ctx context.Context, s *capture.Session) (*pgconn.PgConn, error)
	// NoPrepare sends every extended statement unnamed: a pool in
	// transaction mode keeps nothing prepared between transactions.
	NoPrepare bool
	// LockWaits, when set, is polled while the replay runs for the
	// statements that wait on a lock (see LockSampler).
	LockWaits *LockSampler
	// Timeline keeps every call's send time and latency (Result.Timeline),
	// for a rehearsal that compares the calls during a change with those
	// before it; Started, when set, is told the replay's start.
	Timeline bool
	Started  func(time.Time)
}

// DefaultMaxConnections bounds a replay's connections.
const DefaultMaxConnections = 200

// Result is one replay's measurements.
type Result struct {
	Speed float64 `json:"speed"`
	// Wall is how long the replay took; Scheduled how long its capture
	// took, scaled by the speed (0 at speed 0).
	Wall      time.Duration `json:"-"`
	Scheduled time.Duration `json:"-"`
	WallS     float64       `json:"wall_s"`
	ScheduleS float64       `json:"scheduled_s,omitempty"`
	Sessions  int           `json:"sessions"`
	// ConnectFailed counts sessions that could not connect (their
	// statements are not run); ConnectErrors says why, the first few.
	ConnectFailed int `json:"connect_failed"`
	// Reconnects counts sessions that lost their connection mid-way and
	// opened another.
	Reconnects    int      `json:"reconnects"`
	ConnectErrors []string `json:"connect_errors,omitempty"`
	// Statements sent, and of those Errors (TimedOut among them); NotRun
	// were left when the replay was stopped or a session lost its
	// connection.
	Statements int `json:"statements"`
	Errors     int `json:"errors"`
	TimedOut   int `json:"timed_out"`
	NotRun     int `json:"not_run"`
	// CaptureFailed are statements that failed at capture too.
	CaptureFailed int `json:"capture_failed"`
	// Lag is how far behind schedule the statements were sent.
	Lag Lag `json:"lag"`
	// Shapes are the per-statement-shape measurements, by total time.
	Shapes []*ShapeResult `json:"shapes"`
	// ErrorStates counts errors by SQLSTATE, and ErrorMessages is the
	// server's first message for each.
	ErrorStates   map[string]int    `json:"error_states,omitempty"`
	ErrorMessages map[string]string `json:"error_messages,omitempty"`
	// Stopped says the replay did not run to its end, and why.
	Stopped string `json:"stopped,omitempty"`
	// Start is when the replay began; Timeline every call, in the order
	// sent (with Options.Timeline).
	Start    time.Time `json:"-"`
	Timeline []Call    `json:"-"`
}

// Call is one replayed statement: its shape, when it was sent (ms from
// the replay's start), how late that was against the capture's schedule
// (ms), how long it took (ms) and whether it failed.
type Call struct {
	Shape    int32   `json:"shape"`
	AtMS     float32 `json:"at_ms"`
	BehindMS float32 `json:"behind_ms"`
	MS       float32 `json:"ms"`
	Failed   bool    `json:"failed,omitempty"`
	State    string  `json:"state,omitempty"`
}

// Goodput is statements that succeeded per second of the replay.
func (r *Result) Goodput() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Statements-r.Errors) / r.Wall.Seconds()
}

// Lag is how far behind schedule the statements were sent. Lateness is
// carried from one statement to the next (a session that fell a second
// behind sends everything after a second late until it catches up), so
// it is not summed: a session's lateness at its end is split into what
// the replayer added (each statement sent later than the session was
// free to send it) and the rest, which the server added (statements that
// ran past the gap the capture left before the next one). The most
// behind session's split is reported.
type Lag struct {
	// Behind is how late statements were sent: p50, p95 and max in ms.
	BehindP50 float64 `json:"behind_p50_ms"`
	BehindP95 float64 `json:"behind_p95_ms"`
	BehindMax float64 `json:"behind_max_ms"`
	// EndS is how far behind the most behind session ended, ServerS and
	// ReplayerS its two parts, in seconds.
	EndS      float64 `json:"end_s"`
	ServerS   float64 `json:"server_s"`
	ReplayerS float64 `json:"replayer_s"`
	// ReplayerP99 is the replayer's own delay on one statement (ms), and
	// ReplayerTotalS the sum of those delays over every session.
	ReplayerP99    float64 `json:"replayer_p99_ms"`
	ReplayerTotalS float64 `json:"replayer_total_s"`
	// SlotWaitS is what sessions waited for a connection slot
	// (--max-connections); ConnectP95 how long connecting took (ms).
	SlotWaitS  float64 `json:"slot_wait_s"`
	ConnectP95 float64 `json:"connect_p95_ms"`
}

// ShapeResult is one statement shape's replay.
type ShapeResult struct {
	Fingerprint string `json:"fingerprint"`
	Query       string `json:"query"`
	Calls       int    `json:"calls"`
	Errors      int    `json:"errors"`
	// MS are the latencies of the calls that succeeded, sorted.
	MS []float64 `json:"-"`
	// TotalMS sums every call's latency, failed ones too.
	TotalMS  float64 `json:"total_ms"`
	P50      float64 `json:"p50_ms"`
	P95      float64 `json:"p95_ms"`
	P99      float64 `json:"p99_ms"`
	LockWait float64 `json:"lock_wait_ms"`
	// CapturedMS is the mean time the log gave its calls.
	CapturedMS float64 `json:"captured_mean_ms,omitempty"`
}

// call is one statement's outcome, kept by its session.
type call struct {
	shape  int32
	at     float32 // sent, ms from the replay's start
	ms     float32
	failed bool
	state  string
	// behind is how late it was sent, own the part of that the replayer
	// added (ms).
	behind, own float32
}

// sessionRun is what one session's goroutine measured.
type sessionRun struct {
	calls      []call
	notRun     int
	connErr    error
	slotWait   time.Duration
	connectDur time.Duration
	timedOut   int
	reconnects int
	// messages is the server's first message for each SQLSTATE.
	messages map[string]string
}

// Run replays the workload and measures it. It returns when every session
// has ended, the timeout has passed or ctx is done (Ctrl-C): every
// session's statement in flight is cancelled and its connection closed.
func Run(ctx context.Context, w *capture.Workload, o Options) (*Result, error) {
	if o.Connect == nil {
		return nil, errors.New("replay: no way to connect")
	}
	if o.Speed < 0 {
		return nil, fmt.Errorf("--speed %g: give 0 (as fast as possible) or more", o.Speed)
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut bool
	if o.Timeout > 0 {
		t := time.AfterFunc(o.Timeout, func() { timedOut = true; cancel() })
		defer t.Stop()
	}
	slots := make(chan struct{}, o.MaxConnections)
	runs := make([]sessionRun, len(w.Sessions))
	if o.LockWaits != nil {
		o.LockWaits.start(runCtx, w)
	}
	start := time.Now()
	if o.Started != nil {
		o.Started(start)
	}
	var wg sync.WaitGroup
	for i, s := range w.Sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = runSession(runCtx, s, start, slots, o)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var locks map[int32]float64
	if o.LockWaits != nil {
		locks = o.LockWaits.stop()
	}
	r := collect(w, runs, wall, o.Speed, locks)
	r.Start = start
	if o.Timeline {
		for _, run := range runs {
			for _, c := range run.calls {
				r.Timeline = append(r.Timeline, Call{Shape: c.shape, AtMS: c.at, BehindMS: c.behind, MS: c.ms, Failed: c.failed, State: c.state})
			}
		}
		sort.SliceStable(r.Timeline, func(i, j int) bool { return r.Timeline[i].AtMS < r.Timeline[j].AtMS })
	}
	switch {
	case timedOut:
		r.Stopped = fmt.Sprintf("stopped at --timeout %s", o.Timeout)
	case ctx.Err() != nil:
		r.Stopped = "interrupted"
	}
	return r, nil
}

// at is when a capture offset is due in the replay.
func at(start time.Time, d time.Duration, speed float64) time.Time {
	if speed == 0 {
		return start
	}
	return start.Add(time.Duration(float64(d) / speed))
}

func runSession(ctx context.Context, s *capture.Session, start time.Time, slots chan struct{}, o Options) (run sessionRun) {
	run.calls = make([]call, 0, len(s.Statements))
	notRun := func(from int) sessionRun {
		run.notRun = len(s.Statements) - from
		return run
	}
	if !wait.Until(ctx, at(start, s.Start, o.Speed)) {
		return notRun(0)
	}
	waitFrom := time.Now()
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return notRun(0)
	}
	defer func() { <-slots }()
	run.slotWait = time.Since(waitFrom)
	connFrom := time.Now()
	conn, err := o.Connect(ctx, s)
	run.connectDur = time.Since(connFrom)
	if err != nil {
		run.connErr = err
		return notRun(0)
	}
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	prepared := map[string]string{} // name -> text prepared under it
	prevDone := time.Now()
	for i := range s.Statements {
		st := &s.Statements[i]
		due := at(start, st.At, o.Speed)
		if o.Speed > 0 && !wait.Until(ctx, due) {
			return notRun(i)
		}
		if ctx.Err() != nil {
			return notRun(i)
		}
		sent := time.Now()
		c := call{shape: st.Shape, at: ms(sent.Sub(start))}
		if o.Speed > 0 {
			// The session was free to send at ready: its schedule, or
			// when its previous statement came back, whichever is later.
			ready := due
			if prevDone.After(ready) {
				ready = prevDone
			}
			c.behind, c.own = ms(sent.Sub(due)), ms(max(0, sent.Sub(ready)))
		}
		err := execute(ctx, conn, st, prepared, o)
		done := time.Now()
		if err == nil && o.StatementTimeout > 0 && done.Sub(sent) > o.StatementTimeout+o.StatementTimeout/10 {
			// The answer came after the client's timeout (the cancel did
			// not land: a statement queued in a pool, or one that ended
			// just as it arrived): the client had given up on it.
			err = &pgconn.PgError{Code: "57014", Message: "answered after the replay's statement timeout"}
		}
		c.ms = ms(done.Sub(sent))
		prevDone = done
		if err != nil {
			c.failed = true
			if o.StatementTimeout > 0 && done.Sub(sent) >= o.StatementTimeout && ctx.Err() == nil {
				// The client gave up at its timeout: that is the latency
				// it saw. Getting the cancel through (a pool's queue, JIT
				// compilation that does not stop for it, a connection
				// dropped when the cancel did not land) delays the
				// session's next statement, and shows as lag.
				run.timedOut++
				c.ms = ms(o.StatementTimeout)
			}
			var pgErr *pgconn.PgError
			switch {
			case ctx.Err() != nil:
				// Stopped (Ctrl-C, --timeout): the statement in flight was
				// cancelled by the replay, not failed by the server.
				return notRun(i)
			case errors.As(err, &pgErr):
				c.state = pgErr.Code
				if run.messages == nil {
					run.messages = map[string]string{}
				}
				if _, seen := run.messages[c.state]; !seen {
					run.messages[c.state] = pgErr.Message
				}

			case conn.IsClosed():
				// The connection is gone (the server ended it, or a
				// timeout's cancel did not land in time, as in a pool's
				// queue): the session connects again and goes on, as an
				// application's pool would. What it had prepared is gone
				// with the connection.
				c.state = "08006"
				run.reconnects++
				fresh, cerr := o.Connect(ctx, s)
				if cerr != nil {
					run.calls = append(run.calls, c)
					return notRun(i + 1)
				}
				conn = fresh
				clear(prepared)
			default:
				c.state = "client"
			}
		}
		run.calls = append(run.calls, c)
	}
	return run
}

func ms(d time.Duration) float32 { return float32(d.Seconds() * 1000) }

// execute sends one statement as it was sent at capture: the simple
// protocol for a text, the extended one for a text with values (a named
// statement prepared once per session, as the application did).
func execute(ctx context.Context, conn *pgconn.PgConn, st *capture.Statement, prepared map[string]string, o Options) error {
	if o.StatementTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.StatementTimeout)
		defer cancel()
	}
	switch st.Kind {
	case capture.CopyOut:
		_, err := conn.CopyTo(ctx, io.Discard, st.SQL)
		return timeoutState(ctx, err)
	case capture.Extended:
		params := st.Values()
		if st.Name != "" && !o.NoPrepare {
			if prepared[st.Name] != st.SQL {
				if prepared[st.Name] != "" {
					// The application prepared another text under this
					// name in the log; deallocate ours first.
					conn.Exec(ctx, "DEALLOCATE "+sqlparse.QuoteIdent(st.Name)).Close()
				}
				if _, err := conn.Prepare(ctx, st.Name, st.SQL, nil); err != nil {
					delete(prepared, st.Name)
					return timeoutState(ctx, err)
				}
				prepared[st.Name] = st.SQL
			}
			_, err := conn.ExecPrepared(ctx, st.Name, params, nil, nil).Close()
			return timeoutState(ctx, err)
		}
		_, err := conn.ExecParams(ctx, st.SQL, params, nil, nil, nil).Close()
		return timeoutState(ctx, err)
	}
	_, err := conn.Exec(ctx, st.SQL).ReadAll()
	return timeoutState(ctx, err)
}

// timeoutState reports a statement the statement timeout cancelled as
// PostgreSQL's query_canceled, whether the server's error or the
// client's context came first.
func timeoutState(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return &pgconn.PgError{Code: "57014", Message: "canceling statement due to the replay's statement timeout"}
		}
	}
	return err
}

// capturedMS is each shape's summed latency in the capture (ms) and how
// many of its calls were timed there; it counts the capture's failed calls
// into r.
func capturedMS(w *capture.Workload, r *Result) (captured []float64, capturedN []int) {
	captured = make([]float64, len(w.Shapes))
	capturedN = make([]int, len(w.Shapes))
	for _, s := range w.Sessions {
		for _, st := range s.Statements {
			if st.Took > 0 {
				captured[st.Shape] += st.Took.Seconds() * 1000
				capturedN[st.Shape]++
			}
			if st.Failed {
				r.CaptureFailed++
			}
		}
	}
	return captured, capturedN
}

// collect merges the sessions' calls into the result.
func collect(w *capture.Workload, runs []sessionRun, wall time.Duration, speed float64, locks map[int32]float64) *Result {
	r := &Result{Speed: speed, Wall: wall, WallS: wall.Seconds(), Sessions: len(w.Sessions), ErrorStates: map[string]int{}}
	if speed > 0 {
		r.Scheduled = time.Duration(float64(w.Duration) / speed)
		r.ScheduleS = r.Scheduled.Seconds()
	}
	shapes := make([]*ShapeResult, len(w.Shapes))
	for i, s := range w.Shapes {
		shapes[i] = &ShapeResult{Fingerprint: s.Fingerprint, Query: s.Query, LockWait: locks[int32(i)]}
	}
	captured, capturedN := capturedMS(w, r)
	var behind, own, connects []float64
	for _, run := range runs {
		if speed > 0 && len(run.calls) > 0 {
			r.Lag.addSession(run)
		}
		r.NotRun += run.notRun
		r.TimedOut += run.timedOut
		for state, msg := range run.messages {
			if r.ErrorMessages == nil {
				r.ErrorMessages = map[string]string{}
			}
			if _, seen := r.ErrorMessages[state]; !seen {
				r.ErrorMessages[state] = msg
			}
		}
		r.Reconnects += run.reconnects
		r.Lag.SlotWaitS += run.slotWait.Seconds()
		if run.connErr != nil {
			r.ConnectFailed++
			if len(r.ConnectErrors) < 3 {
				r.ConnectErrors = append(r.ConnectErrors, run.connErr.Error())
			}
			continue
		}
		connects = append(connects, run.connectDur.Seconds()*1000)
		for _, c := range run.calls {
			sh := shapes[c.shape]
			sh.Calls++
			sh.TotalMS += float64(c.ms)
			r.Statements++
			if c.failed {
				sh.Errors++
				r.Errors++
				r.ErrorStates[c.state]++
			} else {
				sh.MS = append(sh.MS, float64(c.ms))
			}
			if speed > 0 {
				behind = append(behind, float64(c.behind))
				own = append(own, float64(c.own))
			}
		}
	}
	sort.Float64s(behind)
	sort.Float64s(own)
	sort.Float64s(connects)
	r.Lag.BehindP50, r.Lag.BehindP95, r.Lag.BehindMax = model.Percentile(behind, 0.5), model.Percentile(behind, 0.95), model.Percentile(behind, 1)
	r.Lag.ReplayerP99 = model.Percentile(own, 0.99)
	r.Lag.ConnectP95 = model.Percentile(connects, 0.95)
	for i, sh := range shapes {
		if sh.Calls == 0 {
			continue
		}
		sort.Float64s(sh.MS)
		sh.P50, sh.P95, sh.P99 = model.Percentile(sh.MS, 0.5), model.Percentile(sh.MS, 0.95), model.Percentile(sh.MS, 0.99)
		if capturedN[i] > 0 {
			sh.CapturedMS = captured[i] / float64(capturedN[i])
		}
		r.Shapes = append(r.Shapes, sh)
	}
	sort.SliceStable(r.Shapes, func(i, j int) bool { return r.Shapes[i].TotalMS > r.Shapes[j].TotalMS })
	return r
}

// addSession counts one session's lag behind the schedule: the replayer's
// own time, and, for the session that ended latest, how much of its lag
// was the replayer's and how much the server's.
func (l *Lag) addSession(run sessionRun) {
	end := float64(run.calls[len(run.calls)-1].behind) / 1000
	ownSum := 0.0
	for _, c := range run.calls {
		ownSum += float64(c.own) / 1000
	}
	l.ReplayerTotalS += ownSum
	if end > l.EndS {
		l.EndS = end
		l.ReplayerS = math.Min(ownSum, end)
		l.ServerS = end - l.ReplayerS
	}
}

// Due is when the call was due on the capture's schedule (ms from the
// replay's start), and Seen its latency counted from then: what the
// application's user waited, since a session held up by a lock sends its
// next statements late, and those wait as long in the application.
func (c Call) Due() float64  { return float64(c.AtMS - c.BehindMS) }
func (c Call) Seen() float64 { return float64(c.BehindMS + c.MS) }
