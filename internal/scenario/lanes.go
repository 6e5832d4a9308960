package scenario

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pgmedic/pgmedic/internal/lab"
)

// RunLanes runs the scenarios of list in three lanes side by side, and
// calls run for each with the cluster it runs on; run says whether the
// demo goes on (a failed scenario stops every lane from starting another).
// The lanes:
//
//   - on the lab's cluster c, one after another from the front of the
//     list: what one does to the server (sessions, load, statistics)
//     must not show in another's samples, so no two share a cluster at
//     once;
//   - on a second cluster, which second makes when there are scenarios
//     that wait (Waits), first those (their sessions sleep, lock and
//     queue rather than compute), then, one after another, the first
//     lane's from the back of the list, as long as any is left that
//     needs no standby (the second cluster has none). A scenario runs on
//     one of the two, never both; which one depends on how long the
//     others took. With second nil every scenario but the isolated ones
//     runs in the first lane;
//   - those on clusters of their own (Isolated), one after another.
//
// The second cluster is released before RunLanes returns; the error is
// second's, when it cannot be made (then the scenarios that wait did not
// run, and their results are missing). The lanes stop when ctx ends.
func RunLanes(ctx context.Context, list []Scenario, c *lab.Cluster, second func() (*lab.Cluster, func(), error), run func(i int, c *lab.Cluster) bool) error {
	shared := &lane{}
	var waits, own []int
	for i, s := range list {
		switch {
		case s.Isolated(c):
			own = append(own, i)
		case s.Waits && second != nil:
			waits = append(waits, i)
		default:
			shared.left = append(shared.left, i)
		}
	}
	// runOn runs scenarios on cl while next gives one.
	runOn := func(cl *lab.Cluster, next func() (int, bool)) {
		for ctx.Err() == nil {
			i, ok := next()
			if !ok {
				return
			}
			if !run(i, cl) {
				shared.stop()
				return
			}
		}
	}
	var wg sync.WaitGroup
	var secondErr error
	if len(waits) > 0 {
		// Made beside the first lane's first scenario, not before it.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c2, release, err := second()
			if err != nil {
				secondErr = fmt.Errorf("starting the lab's second cluster for the scenarios that wait: %w", err)
				return
			}
			defer release()
			runOn(c2, (&lane{left: waits, shared: shared}).front)
			runOn(c2, func() (int, bool) {
				return shared.back(func(i int) bool { return !list[i].Standby })
			})
		}()
	}
	if len(own) > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); runOn(c, (&lane{left: own, shared: shared}).front) }()
	}
	runOn(c, shared.front)
	wg.Wait()
	return secondErr
}

// lane is the scenarios a lane has left to start. The first lane's is
// shared with the second cluster's, which takes from its back; every
// lane checks the shared one's stop.
type lane struct {
	mu      sync.Mutex
	left    []int
	stopped bool
	shared  *lane // nil for the shared lane itself
}

func (l *lane) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}

func (l *lane) halted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}

// front takes the first scenario left.
func (l *lane) front() (int, bool) {
	if l.shared != nil && l.shared.halted() {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || len(l.left) == 0 {
		return 0, false
	}
	i := l.left[0]
	l.left = l.left[1:]
	return i, true
}

// back takes the last scenario left that ok accepts.
func (l *lane) back(ok func(int) bool) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return 0, false
	}
	for k := len(l.left) - 1; k >= 0; k-- {
		if i := l.left[k]; ok(i) {
			l.left = slices.Delete(l.left, k, k+1)
			return i, true
		}
	}
	return 0, false
}
