// Command helpfiles writes what packages ship beside the binary: the man
// pages (DIR/man1) and the shell completions (DIR/completions), from the
// command tree itself. SOURCE_DATE_EPOCH, when set, dates the pages.
//
// usage: go run ./scripts/helpfiles DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgmedic/pgmedic/internal/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/helpfiles DIR")
		os.Exit(2)
	}
	date := time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "helpfiles: SOURCE_DATE_EPOCH %q is not a number of seconds\n", s)
			os.Exit(2)
		}
		date = time.Unix(n, 0).UTC()
	}
	dir := os.Args[1]
	for _, err := range []error{cli.WriteManPages(filepath.Join(dir, "man1"), date), cli.WriteCompletions(filepath.Join(dir, "completions"))} {
		if err != nil {
			fmt.Fprintln(os.Stderr, "helpfiles:", err)
			os.Exit(1)
		}
	}
}
