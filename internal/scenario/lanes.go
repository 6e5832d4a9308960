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
//   - those on clusters of their own (Isolated), one after another from
//     the front of their list; a lane that has run out of its own takes
//     them from the back, so that no lane runs long while the others
//     stand idle.
//
// The second cluster is released before RunLanes returns; the error is
// second's, when it cannot be made (then the scenarios that wait did not
// run, and their results are missing). The lanes stop when ctx ends.
func RunLanes(ctx context.Context, list []Scenario, c *lab.Cluster, second func() (*lab.Cluster, func(), error), run func(i int, c *lab.Cluster) bool) error {
	shared, own := &queue{}, &queue{}
	var waits []int
	for i, s := range list {
		switch {
		case s.Isolated(c):
			own.left = append(own.left, i)
		case s.Waits && second != nil:
			waits = append(waits, i)
		default:
			shared.left = append(shared.left, i)
		}
	}
	// inOrder gives a lane's own scenarios one after another, until a
	// failure stops the shared queue.
	inOrder := func(idx []int) func() (int, bool) {
		return func() (int, bool) {
			if len(idx) == 0 || shared.halted() {
				return 0, false
			}
			i := idx[0]
			idx = idx[1:]
			return i, true
		}
	}
	// runOn runs scenarios on cl while next gives one.
	// A lane whose own scenarios are done takes, from the back, those
	// on clusters of their own that their lane has not started: the
	// lanes stay three, and the longest lane is shared out.
	ownFromBack := func() (int, bool) { return own.take(true, func(int) bool { return true }) }
	runOn := func(cl *lab.Cluster, next func() (int, bool)) {
		for ctx.Err() == nil {
			i, ok := next()
			if !ok {
				return
			}
			if !run(i, cl) {
				shared.stop()
				own.stop()
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
			runOn(c2, inOrder(waits))
			runOn(c2, func() (int, bool) { return shared.take(true, func(i int) bool { return !list[i].Standby }) })
			runOn(c2, ownFromBack)
		}()
	}
	if len(own.left) > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); runOn(c, func() (int, bool) { return own.take(false, nil) }) }()
	}
	runOn(c, func() (int, bool) { return shared.take(false, nil) })
	runOn(c, ownFromBack)
	wg.Wait()
	return secondErr
}

// queue is the first lane's scenarios left to start, which the second
// cluster shares, and whether a failure stopped the lanes.
type queue struct {
	mu      sync.Mutex
	left    []int
	stopped bool
}

func (q *queue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
}

func (q *queue) halted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stopped
}

// take takes the first scenario left, or with fromBack the last one ok
// accepts.
func (q *queue) take(fromBack bool, ok func(int) bool) (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return 0, false
	}
	if !fromBack {
		if len(q.left) == 0 {
			return 0, false
		}
		i := q.left[0]
		q.left = q.left[1:]
		return i, true
	}
	for k := len(q.left) - 1; k >= 0; k-- {
		if i := q.left[k]; ok(i) {
			q.left = slices.Delete(q.left, k, k+1)
			return i, true
		}
	}
	return 0, false
}
