package diagnose

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// unseenShare is the part of the statement time whose absence keeps a
// check from calling a database healthy.
const unseenShare = 0.01

// unseen lists what check could not see: other roles' statements (their
// time is visible, their text is not), statements it could not plan for
// lack of a privilege, other roles' sessions while sampling, a missing
// pg_stat_statements, the server log. Each comes with how much and the
// grant that shows it.
func unseen(s *model.Snapshot, skipped []model.Skip) []model.Unseen {
	var out []model.Unseen
	role := "<pgmedic's role>"
	if s.User != "" {
		role = sqlparse.QuoteIdent(s.User)
	}
	visible := 0.0
	for _, st := range s.Statements {
		visible += st.TotalExecMS
	}
	all := visible + s.StatementsHiddenMS
	share := func(ms float64) float64 {
		if all <= 0 {
			return -1
		}
		return ms / all
	}
	if skip, ok := s.Missing[model.SrcStatements]; ok {
		out = append(out, model.Unseen{What: "statements (" + skip.Reason + ")", Share: -1, Fix: skip.Fix, Blocks: true})
	}
	if s.StatementsHidden > 0 {
		sh := share(s.StatementsHiddenMS)
		out = append(out, model.Unseen{What: "statements of other roles (pg_stat_statements shows their time, not their text)",
			Count: s.StatementsHidden, Share: sh, Fix: "GRANT pg_read_all_stats TO " + role + ";", Blocks: sh < 0 || sh >= unseenShare})
	}
	// Statements it could not EXPLAIN for lack of a privilege: reads
	// block the all-clear (their plans are where the slow scans are);
	// writes need the right to write the table, which a monitoring role
	// should not have, so they are listed without blocking.
	for _, writes := range []bool{false, true} {
		var ms float64
		var ids []int64
		for _, st := range s.Statements {
			msg, ok := s.PlanErrors[st.QueryID]
			if !ok || !permissionDenied(msg) {
				continue
			}
			cmd := ""
			if sh := s.Shapes[st.QueryID]; sh != nil {
				cmd = sh.Command
			}
			if isWrite(cmd) == writes {
				ms += st.TotalExecMS
				ids = append(ids, st.QueryID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		sh := share(ms)
		u := model.Unseen{What: "statements pgmedic may not EXPLAIN (tables its role may not read)", Count: len(ids), Share: sh,
			Fix: s.PlanErrorFixes[ids[0]], Blocks: sh < 0 || sh >= unseenShare}
		if writes {
			u.What, u.Blocks = "writing statements pgmedic may not EXPLAIN (EXPLAIN needs the right to write their tables; their index advice is left out)", false
		}
		out = append(out, u)
	}
	if s.Sampling != nil && s.Sampling.HiddenSessions > 0 {
		out = append(out, model.Unseen{What: "sessions of other roles while sampling (their state, waits and statements)", Count: s.Sampling.HiddenSessions, Share: -1,
			Fix: "GRANT pg_read_all_stats TO " + role + ";", Blocks: true})
	}
	for _, sk := range skipped {
		if sk.Rule == "server log" && permissionDenied(sk.Reason) {
			out = append(out, model.Unseen{What: "the server log (" + sk.Reason + ")", Share: -1, Fix: sk.Fix})
		}
	}
	return out
}

func isWrite(command string) bool {
	switch command {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
		return true
	}
	return false
}

func permissionDenied(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "permission denied") || strings.Contains(m, "must be superuser") || strings.Contains(m, "privilege")
}

// ownStatements is the skipped entry that counts pgmedic's own entries in
// pg_stat_statements (this run's and earlier runs'): they are never the
// application's, and every rule left them out. Nil when there are none.
func ownStatements(s *model.Snapshot) *model.Skip {
	if s.OwnStatements == 0 {
		return nil
	}
	sk := &model.Skip{Rule: "pgmedic's own statements",
		Reason: fmt.Sprintf("pg_stat_statements holds %d entries of pgmedic's own (%.0f ms of execution), this run's and earlier runs': every rule left them out", s.OwnStatements, s.OwnStatementsMS)}
	if s.StatsUntracked {
		sk.Reason = fmt.Sprintf("pg_stat_statements holds %d entries of pgmedic's own from earlier runs (this run's session recorded none): every rule left them out", s.OwnStatements)
	} else {
		role := "<pgmedic's role>"
		if s.User != "" {
			role = sqlparse.QuoteIdent(s.User)
		}
		sk.Fix = "GRANT SET ON PARAMETER pg_stat_statements.track TO " + role + "; (PostgreSQL 15 and later) lets pgmedic keep its statements out of the view"
	}
	return sk
}
