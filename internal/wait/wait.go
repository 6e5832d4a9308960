// Package wait holds the one way pgmedic pauses: for a duration or until
// a moment, or until its context ends (Ctrl-C, a deadline), whichever
// comes first. A pause that outlived its context would keep a replay, a
// rehearsal or an experiment's session open after pgmedic was told to stop.
package wait

import (
	"context"
	"time"
)

// For waits d and says whether it did: false when ctx ended first.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Until waits until the moment at and says whether it came: false when ctx
// ended first.
func Until(ctx context.Context, at time.Time) bool {
	return For(ctx, time.Until(at))
}
