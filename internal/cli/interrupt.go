package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// interrupts turns the first Ctrl-C or SIGTERM into the cancellation of
// the command's context, once a command arms it. A command arms it before
// it runs unless its row in commands says this run has nothing to clean up
// (a plan file read and a report written to stdout): the handler is not
// free. Go answers signal.Notify with a goroutine that waits in the
// runtime for signals, and the thread that wait needs, which cost
// `explain` of a 5-node plan 0.4 ms of its 4.
type interrupts struct {
	once   sync.Once
	cancel context.CancelFunc
	ch     chan os.Signal
	done   chan struct{}
}

type interruptsKey struct{}

// WithInterrupts returns a context that the first Ctrl-C or SIGTERM cancels
// once a command has armed it (a second one then kills the process, as
// the handler is gone), and the function that releases the handler.
func WithInterrupts(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{cancel: cancel, done: make(chan struct{})}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			in.once.Do(func() {}) // not armed after this
			if in.ch != nil {
				signal.Stop(in.ch)
			}
			close(in.done)
			cancel()
		})
	}
	return context.WithValue(ctx, interruptsKey{}, in), stop
}

// armInterrupts installs the handler of the context's WithInterrupts, if
// it has one and it is not installed yet. In-process callers (tests) give
// contexts without one.
func armInterrupts(ctx context.Context) {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if in == nil {
		return
	}
	in.once.Do(func() {
		in.ch = make(chan os.Signal, 1)
		signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case <-in.ch:
				in.cancel()
				signal.Stop(in.ch)
			case <-in.done:
			}
		}()
	})
}

// armUnlessQuiet arms the interrupts before cmd runs, unless cmd's row in
// commands says this run has nothing for Ctrl-C to clean up.
func armUnlessQuiet(cmd *cobra.Command) {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	for _, c := range commands {
		if c.name == top.Name() && c.quiet != nil && c.quiet(cmd) {
			return
		}
	}
	armInterrupts(cmd.Context())
}
