// Package cli is pgmedic's command line. Run is the whole program; main only
// wires the process to it, so every command can be tested in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/scenario"
)

// Version and Commit are set at build time (scripts/build.sh:
// -ldflags "-X ...cli.Version=... -X ...cli.Commit=...").
var (
	Version = defaultVersion
	Commit  = ""
)

const defaultVersion = "0.1.0-dev"

// versionText is what --version prints: the version, and the commit it
// was built from when the build said. A binary built without -ldflags
// (go install, go build) says what Go's build information holds.
func versionText() string {
	v, c := Version, Commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		v, c = fromBuildInfo(bi, v, c)
	}
	switch {
	case c == "" && v == defaultVersion:
		// Go records the revision of the checkout it builds from, unless
		// told not to (-buildvcs=false, in GOFLAGS or go env) or there is
		// no git to ask: a bug report then names no commit, and says why.
		return v + " (no commit recorded: built outside a git checkout or with -buildvcs=false)"
	case c == "":
		return v
	}
	return v + " (commit " + c + ")"
}

// fromBuildInfo fills what -ldflags did not set: the module's version
// (go install ...@v1.2.0, or a pseudo-version for a commit) and the VCS
// revision go build records from a checkout, marked when the tree had
// changes.
func fromBuildInfo(bi *debug.BuildInfo, version, commit string) (string, string) {
	if version == defaultVersion && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	if commit != "" {
		return version, commit
	}
	var rev string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && modified {
		rev += ", with changes"
	}
	return version, rev
}

// Exit codes: a contract with scripts and CI jobs, documented in README.md.
const (
	ExitOK       = 0
	ExitFindings = 1
	ExitInput    = 2
	ExitInternal = 3
	// ExitIncomplete: nothing found in what check could see, but it could
	// not see enough to call the database healthy (the report's first
	// lines say what and the grant that shows it).
	ExitIncomplete = 4
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks bad flags or arguments (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: ExitInput, err: fmt.Errorf(format, args...)}
}

// inputErr marks a problem with what the user pointed pgmedic at (exit 2).
func inputErr(err error) error { return &exitError{code: ExitInput, err: err} }

// errFindings reports findings at or above --min-severity (exit 1).
var errFindings = &exitError{code: ExitFindings, err: errors.New("findings at or above --min-severity")}

// errIncomplete is a check that found nothing in what it could see, while
// it could not see part of the database (exit 4).
var errIncomplete = &exitError{code: ExitIncomplete, err: errors.New("could not see all of the database: the report's first lines say what, and the grant that shows it")}

// Run executes pgmedic with args (without the program name) and returns the
// process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(args, stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	var ce *envelope.ConnectError
	var ie *diagnose.InputError
	if ctx.Err() != nil {
		// Interrupted (Ctrl-C, SIGTERM): whatever failed on the way out
		// failed because of it. Statements in flight were cancelled on
		// the server (envelope sends PostgreSQL's cancel request).
		fmt.Fprintln(stderr, "pgmedic: interrupted; statements in flight were cancelled on the server")
		return ExitInput
	}
	switch {
	case errors.As(err, &ee):
		if ee.code != ExitFindings {
			fmt.Fprintln(stderr, "pgmedic: "+oneLine(ee.err.Error()))
		}
		return ee.code
	case errors.As(err, &ce):
		fmt.Fprintln(stderr, "pgmedic: "+oneLine(ce.Error()))
		return ExitInput
	case errors.As(err, &ie):
		fmt.Fprintln(stderr, "pgmedic: "+oneLine(ie.Error()))
		return ExitInput
	case errors.Is(err, lab.ErrNoPostgres), errors.As(err, new(*scenario.MissingClient)):
		fmt.Fprintln(stderr, "pgmedic: "+oneLine(err.Error()))
		return ExitInput
	case isCobraUsage(err):
		fmt.Fprintln(stderr, "pgmedic: "+oneLine(err.Error())+" (see pgmedic --help)")
		return ExitInput
	default:
		fmt.Fprintln(stderr, "pgmedic: internal error: "+oneLine(err.Error()))
		return ExitInternal
	}
}

// isCobraUsage recognises cobra's own flag and argument errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires exactly"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// oneLine folds a message onto one line and shows any control character
// left in it (a relation name from the database can hold ESC sequences).
func oneLine(s string) string { return printable.String(printable.OneLine(s)) }

// commands are pgmedic's subcommands by name, in the order help lists
// them. quiet, when set, says a run of the command has nothing for Ctrl-C
// to clean up (no server, no process started, no file written), so no
// signal handler is installed for it and Ctrl-C ends it at once
// (interrupt.go).
var commands = []struct {
	name  string
	short string // the command's Short, for the root's help without building it
	build func(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command
	quiet func(*cobra.Command) bool
	// page is the command's guide under docs/ (its flags are in
	// docs/reference, generated from the tree).
	page string
}{
	{"check", checkShort, func(_ io.Reader, o, e io.Writer) *cobra.Command { return newCheck(o, e) }, nil, "docs/check.md"},
	{"explain", explainShort, newExplain, explainQuiet, "docs/explain.md"},
	{"lab", labShort, func(_ io.Reader, o, e io.Writer) *cobra.Command { return newLab(o, e) }, nil, "docs/lab.md"},
	{"demo", demoShort, func(_ io.Reader, o, e io.Writer) *cobra.Command { return newDemo(o, e) }, nil, "docs/lab.md"},
	{"logs", logsShort, func(i io.Reader, o, _ io.Writer) *cobra.Command { return newLogs(i, o) }, nil, "docs/logs.md"},
	{"profile", profileShort, func(_ io.Reader, o, e io.Writer) *cobra.Command { return newProfile(o, e) }, nil, "docs/profile.md"},
	{"replay", replayShort, newReplay, nil, "docs/replay.md"},
	{"rehearse", rehearseShort, newRehearse, nil, "docs/rehearse.md"},
	{"watch", watchShort, newWatch, nil, "docs/watch.md"},
}

// Guides maps each command to its guide under docs/, for the house's tests.
func Guides() map[string]string {
	out := map[string]string{}
	for _, c := range commands {
		out[c.name] = c.page
	}
	return out
}

// newRoot is the pgmedic command with its subcommands: only the one args
// name when they start with one, none for --version, each by its name and
// line for the root's --help, every one otherwise (no arguments: the
// reference pages; completion, help of a command, a mistyped name that
// gets suggestions). Building every command's flags
// is a tenth of what a short run such as explain of a small plan costs.
func newRoot(args []string, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "pgmedic",
		Short:         "find why a PostgreSQL database is slow or failing, prove it, and hand over the fix",
		Version:       versionText(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		warnRenamed(cmd, stderr)
		armUnlessQuiet(cmd)
	}
	for _, c := range commands {
		if len(args) > 0 && args[0] == c.name {
			root.AddCommand(c.build(stdin, stdout, stderr))
			// Shell completion calls pgmedic with "__complete" first,
			// which builds every command.
			root.CompletionOptions.DisableDefaultCmd = true
			return root
		}
	}
	switch {
	case len(args) == 1 && (args[0] == "--version" || args[0] == "-v"):
		// The version is the root's own: no command is needed.
		return root
	case len(args) == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help"):
		// The root's help lists each command by its name and line only.
		for _, c := range commands {
			root.AddCommand(&cobra.Command{Use: c.name, Short: c.short, Run: func(*cobra.Command, []string) {}})
		}
		return root
	}
	for _, c := range commands {
		root.AddCommand(c.build(stdin, stdout, stderr))
	}
	return root
}

// warnRenamed says, in one line on stderr, which renamed flag a command
// line used and what replaced it: the old spelling works for one release.
// (pflag writes its own notice into cobra's flag-error buffer, which is
// printed only when parsing fails.)
func warnRenamed(cmd *cobra.Command, stderr io.Writer) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			fmt.Fprintf(stderr, "pgmedic: --%s is an old name: %s\n", f.Name, f.Deprecated)
		}
	})
}

// progress returns a logger that writes to stderr only when it is a terminal.
func progress(stderr io.Writer) func(string, ...any) {
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return func(format string, args ...any) { fmt.Fprintf(stderr, "pgmedic: "+format+"\n", args...) }
	}
	return func(string, ...any) {}
}

// writeOut writes to --out or stdout. A file is written whole or not at all,
// so an error never leaves a report that looks complete.
func writeOut(path string, stdout io.Writer, render func(io.Writer) error) error {
	if path == "" {
		return render(stdout)
	}
	tmp, err := os.CreateTemp(dirOf(path), ".pgmedic-*")
	if err != nil {
		return inputErr(fmt.Errorf("cannot write --out %s: %w", path, err))
	}
	defer os.Remove(tmp.Name())
	if err := render(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return inputErr(fmt.Errorf("cannot write --out %s: %w", path, err))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return inputErr(fmt.Errorf("cannot write --out %s: %w", path, err))
	}
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		if i == 0 {
			return "/"
		}
		return path[:i]
	}
	return "."
}
