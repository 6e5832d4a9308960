package wait

import (
	"context"
	"testing"
	"time"
)

// TestForEndsWithItsContext: a pause ends when its context does, and says
// so; one whose time came says that.
func TestForEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if For(ctx, time.Hour) {
		t.Error("a pause of an hour on an ended context said it waited")
	}
	if !For(context.Background(), time.Millisecond) || !Until(context.Background(), time.Now().Add(-time.Second)) {
		t.Error("a pause whose time came said it was cut short")
	}
	if Until(ctx, time.Now().Add(-time.Second)) {
		t.Error("a moment already past, on an ended context, said it came")
	}
}
