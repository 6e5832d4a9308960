package diagnose

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// checkLogs reads the logs a check was given (--log) and the end of the
// server's own log when the role may read it, and returns their findings
// (the executed plans' (a cast only the plan shows, JIT per execution) and
// the log's events') and the events themselves, which the snapshot's rules
// read too (connections refused are seen only in the log). newFindings
// keeps those the check did not make itself.
//
// The log's statements with their values (auto_explain's query texts,
// the slowest logged calls) are given to the snapshot's statements of
// the same fingerprint that pg_stat_activity showed none for: a re-run
// then uses the application's constants, not stand-ins of their types.
func (o Options) checkLogs(ctx context.Context, sess *envelope.Session, snap *model.Snapshot) ([]model.Finding, *model.LogEvents, []model.Skip, error) {
	user := snap.User
	var sources []logs.Source
	for _, f := range o.LogFiles {
		sources = append(sources, logs.FileSource(f, nil))
	}
	var skipped []model.Skip
	if o.ServerLogBytes > 0 {
		sl, skip := collect.ReadServerLog(ctx, sess.Conn, user, o.ServerLogBytes)
		if skip != nil {
			skipped = append(skipped, *skip)
		} else {
			o.logf("read the server log %s", sl)
			data := sl.Data
			sources = append(sources, logs.Source{Name: "server:" + sl.Path, Open: func() (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(data)), nil
			}})
		}
	}
	if len(sources) == 0 {
		return nil, nil, skipped, nil
	}
	s, found, more, err := Logs(ctx, sources, logs.Options{}, nil, func(ctx context.Context, tables []string) (*model.CastCatalog, error) {
		return collect.CastCatalog(ctx, sess.Conn, tables)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	skipped = append(skipped, more...)
	for _, f := range s.Files {
		if f.Error == "" && f.Entries > 0 {
			continue
		}
		why := f.Error
		if why == "" {
			why = "no entries"
		}
		if strings.HasPrefix(f.Name, "server:") {
			skipped = append(skipped, model.Skip{Rule: "server log", Reason: fmt.Sprintf("%s could not be read: %s", f.Name, why), Fix: "give the log with --log FILE"})
			continue
		}
		// A file the user named must be read: say so and stop.
		return nil, nil, nil, InputErrorf("--log %s: %s", f.Name, why)
	}
	o.logf("the logs gave %d findings", len(found))
	var events *model.LogEvents
	if s.Parsed() {
		ev := s.LogEvents()
		events = &ev
	}
	literalsFromLog(snap, s.Literals())
	return found, events, skipped, nil
}

// literalsFromLog fills snap.Literals, for statements it has none of,
// from the log's texts by fingerprint.
func literalsFromLog(snap *model.Snapshot, byFingerprint map[string]string) {
	if len(byFingerprint) == 0 {
		return
	}
	if snap.Literals == nil {
		snap.Literals = map[int64]string{}
	}
	for _, st := range snap.Statements {
		if snap.Literals[st.QueryID] != "" {
			continue
		}
		fp := st.Fingerprint
		if fp == "" {
			fp, _ = sqlparse.Fingerprint(st.Query)
		}
		if lit := byFingerprint[fp]; lit != "" {
			snap.Literals[st.QueryID] = lit
		}
	}
}

// newFindings keeps the log's findings that the check did not make: not
// the same rule on the same statement text, nor a session rule the
// check's sampling already judged, nor a plan's finding about a statement
// the check already explained with a rule that owns the class (see
// rules.Owners: a LIKE prefix is collation-prefix's, a key hidden from
// pruning partition-pruning's, however the log's plan reads); with
// --rules, only those rules.
func newFindings(found, have []model.Finding, only []string) []model.Finding {
	want := map[string]bool{}
	for _, id := range only {
		want[id] = true
	}
	seen := map[string]bool{}
	for _, f := range have {
		seen[f.Rule+"|"+f.Object.Name] = true
		seen[f.Rule] = true
		if f.Object.Fingerprint != "" {
			seen[f.Rule+"|fp|"+f.Object.Fingerprint] = true
		}
	}
	owned := func(f model.Finding) bool {
		if f.Object.Fingerprint == "" {
			return false
		}
		for _, owner := range rules.Owners(f.Rule) {
			if seen[owner+"|fp|"+f.Object.Fingerprint] {
				return true
			}
		}
		return false
	}
	var out []model.Finding
	for _, f := range found {
		if len(want) > 0 && !want[f.Rule] {
			continue
		}
		if seen[f.Rule+"|"+f.Object.Name] || (f.Object.Kind == "log" && seen[f.Rule]) || owned(f) {
			continue
		}
		out = append(out, f)
	}
	rules.RankPlan(out)
	return out
}

// LogsReport is `logs`: the logs read, their findings, and one error that
// says why when nothing could be read, rather than a report that looks
// complete.
func LogsReport(ctx context.Context, version string, sources []logs.Source, opt logs.Options, ruleIDs []string) (*report.LogsReport, error) {
	s, findings, skipped, err := Logs(ctx, sources, opt, ruleIDs, nil)
	if err != nil {
		return nil, InputErr(err)
	}
	if !s.Parsed() {
		return nil, InputErrorf("nothing could be parsed (%s)", whyUnparsed(s))
	}
	for i := range findings {
		findings[i].Clamp() // its id, as check's findings have
	}
	return &report.LogsReport{PGMedic: version, Summary: s, Findings: findings, Skipped: skipped}, nil
}

// whyUnparsed names the first file that could not be read, or the first
// whose lines did not read as its format, with what to check.
func whyUnparsed(s *logs.Summary) string {
	for _, f := range s.Files {
		if f.Error != "" {
			return f.Name + ": " + f.Error
		}
		if f.Lines > 0 {
			why := fmt.Sprintf("%s: none of its %d lines reads as %s", f.Name, f.Lines, f.Format)
			if f.Prefix != "" {
				why += fmt.Sprintf(" with log_line_prefix %q", f.Prefix)
			}
			if len(f.Examples) > 0 {
				why += fmt.Sprintf("; the first: %q", f.Examples[0])
			}
			return why + "; check --prefix (SHOW log_line_prefix) and --format-in"
		}
	}
	return "no entries"
}
