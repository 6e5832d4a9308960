package scenario

import (
	"context"
	"fmt"
	"sync"

	"github.com/pgmedic/pgmedic/internal/lab"
)

// RunLanes runs the scenarios of list in three lanes side by side, and
// calls run for each with the cluster it runs on; run says whether its
// lane goes on. The lanes:
//
//   - on the lab's cluster c, one after another in order: their
//     measurements share its cores, and what one does to the server
//     (sessions, load) must not show in another's samples;
//   - those that wait (Waits) one after another on a second cluster,
//     which second makes when there are any: their sessions sleep, lock
//     and queue rather than compute (with second nil they run in the
//     first lane);
//   - those on clusters of their own (Isolated), one after another.
//
// The second cluster is destroyed before RunLanes returns; the error is
// second's, when it cannot be made (then the scenarios that wait did not
// run, and their results are missing). The lanes stop when ctx ends.
func RunLanes(ctx context.Context, list []Scenario, c *lab.Cluster, second func() (*lab.Cluster, error), run func(i int, c *lab.Cluster) bool) error {
	var main, waits, own []int
	for i, s := range list {
		switch {
		case s.Isolated(c):
			own = append(own, i)
		case s.Waits && second != nil:
			waits = append(waits, i)
		default:
			main = append(main, i)
		}
	}
	lane := func(idx []int, c *lab.Cluster) {
		for _, i := range idx {
			if ctx.Err() != nil || !run(i, c) {
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
			c2, err := second()
			if err != nil {
				secondErr = fmt.Errorf("starting the lab's second cluster for the scenarios that wait: %w", err)
				return
			}
			defer c2.Destroy(context.Background())
			lane(waits, c2)
		}()
	}
	if len(own) > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); lane(own, c) }()
	}
	lane(main, c)
	wg.Wait()
	return secondErr
}
