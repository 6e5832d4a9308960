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
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
