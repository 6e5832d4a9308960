package collect

import (
	"context"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// driverTypes are the types drivers commonly bind a parameter as: Python's
// Decimal, float, str and datetime (psycopg), Java's BigDecimal, double,
// String with stringtype=varchar, long and Timestamp (JDBC), and the same
// in .NET and Go drivers.
var driverTypes = []string{"numeric", "double precision", "text", "bigint", "character varying",
	"timestamp with time zone", "timestamp without time zone"}

const (
	// A statement is probed when each call touched at least minProbeBlocks
	// shared buffers and more than costGap times what the re-planned
	// statement's cost accounts for; a client type is taken when its plan
	// accounts for at least 1/costGap of the observed blocks.
	minProbeBlocks = 100
	costGap        = 4
	maxProbed      = 10
)

// clientTypes runs the parameter-type probe (see model.ClientType) over
// the planned statements whose observed cost their plan does not explain.
// It uses EXPLAIN without ANALYZE only.
func clientTypes(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	s.ClientTypes = map[int64]*model.ClientType{}
	probed := 0
	for _, st := range s.Statements {
		ex := s.Plans[st.QueryID]
		if ex == nil || st.Parsed == nil || st.Calls == 0 || probed >= maxProbed || ctx.Err() != nil {
			continue
		}
		blocks := float64(st.SharedBlksHit+st.SharedBlksRead) / float64(st.Calls)
		if blocks < minProbeBlocks || blocks <= costGap*ex.Plan.TotalCost {
			continue
		}
		probed++
		if ct := probeTypes(ctx, q, s, st.Parsed, blocks, ex.Plan.TotalCost); ct != nil {
			s.ClientTypes[st.QueryID] = ct
		}
	}
}

// probeTypes plans the statement with each driver type in turn for each
// parameter compared with a column of another type.
func probeTypes(ctx context.Context, q envelope.Conn, s *model.Snapshot, st *sqlparse.Statement, blocks, inferred float64) *model.ClientType {
	query, err := st.Runnable()
	if err != nil {
		return nil
	}
	n := st.ParamCount()
	// The other parameters keep what a second PREPARE would declare for
	// them; only the probed one changes.
	base := st.FallbackParamTypes(n, s.ColumnType)
	if base == nil {
		base = make([]string, n)
		for i := range base {
			base[i] = "unknown"
		}
	}
	byParam := st.ParamColumns()
	params := make([]int, 0, len(byParam))
	for p := range byParam {
		params = append(params, p)
	}
	sort.Ints(params)
	for _, p := range params {
		for _, c := range byParam[p] {
			colType := s.ColumnType(c)
			if colType == "" {
				continue
			}
			for _, typ := range driverTypes {
				if baseType(colType) == typ {
					continue
				}
				types := append([]string(nil), base...)
				types[p-1] = typ
				ex, err := genericPlan(ctx, q, query, types)
				if err != nil || ex.Plan.TotalCost*costGap < blocks {
					continue
				}
				return &model.ClientType{Param: p, Type: typ, Column: c.Column, ColumnType: colType, Types: types, Plan: ex,
					BlocksPerCall: blocks, InferredCost: inferred, ClientCost: ex.Plan.TotalCost}
			}
		}
	}
	return nil
}

// baseType drops a type's modifier: numeric(12,2) is numeric.
func baseType(t string) string {
	if i := strings.IndexByte(t, '('); i > 0 {
		return strings.TrimSpace(t[:i])
	}
	return t
}

// genericPlan is the generic plan of query prepared with the given types.
func genericPlan(ctx context.Context, q envelope.Conn, query string, types []string) (*plan.Explain, error) {
	return generic(ctx, q, query, len(types), func() error {
		return envelope.PrepareAs(ctx, q, planStmt, types, query)
	})
}
