// Command pgmedic finds why a PostgreSQL database is slow or failing, proves
// each finding with a measured experiment, and hands over the fix.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgmedic/pgmedic/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the work (pgmedic then cancels its
	// statements on the server and cleans up); a second one kills.
	go func() { <-ctx.Done(); stop() }()
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
