package plan

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestNumbersRejected(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"text NaN cost":              {"Seq Scan on t  (cost=0.00..NaN rows=1 width=4)\n", "line 1 (Seq Scan): total cost is NaN"},
		"text Inf time":              {"Limit  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..Inf rows=1 loops=1)\n  ->  Seq Scan on t  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=1)\n", "line 1 (Limit): actual total time is +Inf"},
		"text negative loops":        {"Limit  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=1)\n  ->  Seq Scan on t  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=-3)\n", "line 2 (Seq Scan): loops is -3"},
		"text negative rows removed": {"Seq Scan on t  (cost=0.00..1.00 rows=1 width=4)\n  Rows Removed by Filter: -5\n", "Rows Removed by Filter is -5"},
		"text NaN execution":         {"Seq Scan on t  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=1)\nExecution Time: NaN ms\n", "Execution Time is NaN"},
		"json negative loops":        {`[{"Plan": {"Node Type": "Seq Scan", "Actual Loops": -1, "Actual Rows": 1}}]`, "node 1 (Seq Scan): loops is -1"},
		"json negative buffers":      {`{"Plan": {"Node Type": "Seq Scan", "Shared Hit Blocks": -7}}`, "shared hit blocks is -7"},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !errors.Is(err, ErrNotAPlan) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error saying %q, got %v", name, c.want, err)
		}
	}
}

// Huge but finite figures are accepted, and everything derived from them
// stays finite, so a JSON report can carry it.
func TestHugeNumbersSaturate(t *testing.T) {
	e, err := Parse([]byte(`[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "t", "Total Cost": 1e308,
		"Actual Total Time": 1e308, "Actual Rows": 1e308, "Actual Loops": 1e308,
		"Shared Hit Blocks": 9223372036854775807, "Shared Read Blocks": 9223372036854775807}, "Execution Time": 1e308}]`))
	if err != nil {
		t.Fatal(err)
	}
	f := e.Plan.Figures
	for name, v := range map[string]float64{"inclusive": f.InclusiveMS, "exclusive": f.ExclusiveMS, "rows": f.TotalRows, "share": f.Share} {
		if math.IsInf(v, 0) || math.IsNaN(v) || v < 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	if b := e.Plan.Buffers.Total(); b != math.MaxInt64 {
		t.Errorf("buffer total wrapped: %d", b)
	}
	if _, err := json.Marshal(e); err != nil {
		t.Errorf("the model does not encode as JSON: %v", err)
	}
}
