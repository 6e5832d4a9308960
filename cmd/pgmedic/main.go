// Command pgmedic finds why a PostgreSQL database is slow or failing, proves
// each finding with a measured experiment, and hands over the fix.
package main

import (
	"context"
	"os"

	"github.com/pgmedic/pgmedic/internal/cli"
)

func main() {
	// The first Ctrl-C or SIGTERM cancels the work (pgmedic then cancels
	// its statements on the server and cleans up); a second one kills.
	ctx, stop := cli.WithInterrupts(context.Background())
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
