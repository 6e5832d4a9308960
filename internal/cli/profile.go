package cli

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
)

// profileShort is the line help lists the command with.
const profileShort = "sample where backends spend CPU with perf, draw the flame graph and name the hot spot"

// newProfile is `pgmedic profile`: perf on PostgreSQL backends (or any
// process), each sample attributed to its statement, the hot spots named.
func newProfile(stdout, stderr io.Writer) *cobra.Command {
	var o outputFlags
	var pids []int
	var busiest, freq int
	var like, svg, folded, speedscope, pprof string
	var noVerify bool
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "profile [DSN]",
		Short: profileShort,
		Long: `profile finds backends in pg_stat_activity (--busiest K by CPU, --query-like TEXT) or takes
--pid (any process, PostgreSQL or not), samples them with perf (cpu-clock, call graphs) for
--duration while it watches pg_stat_activity to attribute each sample to the statement its
backend ran, and names the hot spots: JIT compilation, time-zone and numeric/float conversions,
spin locks, glibc malloc, sorting, hashing, page faults. perf runs on the database server's
machine, as root or with kernel.perf_event_paranoid <= 1.

Exports: --svg (an interactive flame graph), --folded, --speedscope, --pprof (go tool pprof).
Exit codes: 0 nothing at or above --min-severity, 1 findings, 2 usage, perf or connection error.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			least, ids, err := o.validate()
			if err != nil {
				return err
			}
			if duration < 100*time.Millisecond || duration > 10*time.Minute {
				return usageErr("--duration must be between 100ms and 10m")
			}
			if freq < 1 || freq > 20000 {
				return usageErr("--frequency must be between 1 and 20000 samples a second")
			}
			if len(pids) == 0 && busiest == 0 && like == "" {
				busiest = 1
			}
			dsn := ""
			if len(args) == 1 {
				dsn = args[0]
			}
			rep, p, err := diagnose.ProfileCommand(cmd.Context(), Version, diagnose.ProfileOptions{
				ProfileRules: diagnose.ProfileRules{Rules: ids, NoVerify: noVerify, Log: progress(stderr)},
				DSN:          dsn, HasDSN: len(args) == 1, Select: profile.Select{PIDs: pids, Busiest: busiest, QueryLike: like},
				Duration: duration, Frequency: freq}, least)
			if err != nil {
				return err
			}
			if err := writeExports(p, rep.Folded, rep.FlameSVG, exports{svg: svg, folded: folded, speedscope: speedscope, pprof: pprof}, stdout); err != nil {
				return err
			}
			return emit(rep, o, least, stdout)
		},
	}
	addReport(cmd, &o, "warning")
	cmd.Flags().IntSliceVar(&pids, "pid", nil, "profile these processes (any process; repeat or separate with commas)")
	cmd.Flags().IntVar(&busiest, "busiest", 0, "profile the K client backends using the most CPU now (default 1 when neither --pid nor --query-like)")
	cmd.Flags().StringVar(&like, "query-like", "", "profile the active backends whose query contains this text")
	addDuration(cmd, &duration, 10*time.Second)
	cmd.Flags().IntVar(&freq, "frequency", 499, "samples a second per CPU (an odd number avoids beating with periodic work)")
	cmd.Flags().StringVar(&svg, "svg", "", "write the flame graph as an interactive SVG to this file")
	cmd.Flags().StringVar(&folded, "folded", "", "write the folded stacks (flamegraph.pl's input) to this file")
	cmd.Flags().StringVar(&speedscope, "speedscope", "", "write a speedscope profile (https://www.speedscope.app) to this file")
	cmd.Flags().StringVar(&pprof, "pprof", "", "write a pprof profile (go tool pprof) to this file")
	addNoVerify(cmd, &noVerify)
	return cmd
}

// exports are the files profile writes besides its report.
type exports struct{ svg, folded, speedscope, pprof string }

// writeExports writes each export asked for, whole or not at all; the
// flame graph is the one the report drew.
func writeExports(p model.Profile, f map[string]int64, flame string, e exports, stdout io.Writer) error {
	for path, write := range map[string]func(io.Writer) error{
		e.svg:        func(w io.Writer) error { _, err := io.WriteString(w, flame); return err },
		e.folded:     func(w io.Writer) error { return profile.WriteFolded(w, f) },
		e.speedscope: func(w io.Writer) error { return profile.WriteSpeedscope(w, p.Target, f) },
		e.pprof:      func(w io.Writer) error { return profile.WritePprof(w, p) },
	} {
		if path == "" {
			continue
		}
		if err := writeOut(path, stdout, write); err != nil {
			return err
		}
		os.Chmod(path, 0o644)
	}
	return nil
}
