package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/scenario"
)

func newLab(stdout, stderr io.Writer) *cobra.Command {
	var dir string
	var leftovers bool
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "throwaway PostgreSQL cluster and the incident scenarios",
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "lab state directory (default "+lab.DefaultDir()+")")
	stateDir := func() string {
		if dir != "" {
			return dir
		}
		return lab.DefaultDir()
	}

	up := &cobra.Command{
		Use:   "up",
		Short: "start a lab cluster that stays up until `pgmedic lab down`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d := stateDir()
			if c, err := lab.Load(d); err == nil {
				switch {
				case c.Complete() && c.Running():
					return usageErr("a lab cluster is already running in %s: %s", d, c.DSN(""))
				case c.Running() && c.Adopt() == nil:
					// pgmedic was killed after the server started: the
					// server is fine, take it over.
					fmt.Fprintf(stdout, "lab cluster up (adopted the server left running in %s): %s\n%s\n", d, c.Version, c.DSN(""))
					return nil
				}
				// Stopped, half-made or stale after a machine restart:
				// clear it and start afresh.
				if err := c.Destroy(context.Background()); err != nil {
					return inputErr(err)
				}
			}
			c, err := lab.Create(cmd.Context(), lab.Options{Dir: d, Log: progress(stderr)})
			if err != nil {
				return inputErr(err)
			}
			fmt.Fprintf(stdout, "lab cluster up: %s\n%s\n", c.Version, c.DSN(""))
			return nil
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "show the lab cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			leftovers := lab.Leftovers()
			for _, l := range leftovers {
				fmt.Fprintf(stdout, "leftover throwaway cluster in %s, %s (its pgmedic is gone): remove it with `pgmedic lab down --dir %s`\n", l.Dir, l.Describe(), l.Dir)
			}
			c, err := lab.Load(stateDir())
			if err != nil {
				if errors.Is(err, lab.ErrNoCluster) && len(leftovers) > 0 {
					fmt.Fprintf(stdout, "no lab cluster in %s\n", stateDir())
					return nil
				}
				return inputErr(err)
			}
			fmt.Fprintf(stdout, "lab cluster %s in %s\n", c.Describe(), c.Dir)
			if c.Complete() {
				fmt.Fprintf(stdout, "%s\n%s\n", c.Version, c.DSN(""))
			} else {
				fmt.Fprintf(stdout, "remove it with `pgmedic lab down --dir %s`, or run `pgmedic lab up` to replace it\n", c.Dir)
			}
			return nil
		},
	}
	down := &cobra.Command{
		Use:   "down",
		Short: "stop the lab cluster and remove its directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if leftovers {
				for _, l := range lab.Leftovers() {
					if err := l.Destroy(context.Background()); err != nil {
						return inputErr(err)
					}
					fmt.Fprintf(stdout, "leftover cluster in %s stopped and removed\n", l.Dir)
				}
				return nil
			}
			c, err := lab.Load(stateDir())
			if err != nil {
				if errors.Is(err, lab.ErrNoCluster) && len(lab.Leftovers()) > 0 {
					return inputErr(fmt.Errorf("%w; leftover throwaway clusters exist: `pgmedic lab down --leftovers` removes them", err))
				}
				return inputErr(err)
			}
			if err := c.Destroy(context.Background()); err != nil {
				return inputErr(err)
			}
			fmt.Fprintf(stdout, "lab cluster in %s stopped and removed\n", c.Dir)
			return nil
		},
	}
	down.Flags().BoolVar(&leftovers, "leftovers", false, "remove every throwaway cluster whose pgmedic was killed before it could clean up")
	list := &cobra.Command{
		Use:   "list",
		Short: "list the scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
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
	var f checkFlags
	run := &cobra.Command{
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
			logf := progress(stderr)
			c, err := lab.Load(stateDir())
			if err != nil || !c.Running() {
				if c, err = lab.Create(cmd.Context(), lab.Options{Log: logf, Started: announceThrowaway(stderr)}); err != nil {
					return inputErr(err)
				}
				defer c.Destroy(context.Background())
			}
			res, err := scenario.Run(cmd.Context(), c, sc, Version, f.options(ids, logf), min)
			if err != nil {
				return err
			}
			render := func(w io.Writer) error {
				if err := res.Report.Text(w); err != nil {
					return err
				}
				writeMetrics(w, res.Metrics)
				return nil
			}
			if f.format == "json" {
				render = res.Report.JSON
			}
			if err := writeOut(f.out, stdout, render); err != nil {
				return err
			}
			if len(res.Missing) > 0 || len(res.Unexpected) > 0 {
				return &exitError{code: ExitFindings, err: fmt.Errorf("scenario %s: missing %v, unexpected %v", sc.Name, res.Missing, res.Unexpected)}
			}
			fmt.Fprintf(stderr, "scenario %s: every expected finding present, nothing unexpected\n", sc.Name)
			return nil
		},
	}
	f.register(run)
	cmd.AddCommand(up, status, down, list, run)
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
