package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

func TestNPlusOne(t *testing.T) {
	const lookup = "SELECT id, sku FROM order_lines WHERE id = $1"
	loopTicks := func(n int, state string, stateMS, xactMS float64) []model.ActivitySample {
		var out []model.ActivitySample
		for i := range n {
			st := state
			if state == "mixed" {
				st = map[bool]string{true: "active", false: "idle in transaction"}[i%5 == 0]
			}
			out = append(out, model.ActivitySample{At: time.Unix(int64(i), 0), Backends: []model.Backend{
				{PID: 7, Database: "shop", State: st, Query: "SELECT id, sku FROM order_lines WHERE id = 42", XactMS: xactMS, StateMS: stateMS}}})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		query   string
		calls   int64
		meanMS  float64
		samples []model.ActivitySample
		fires   bool
	}{
		{name: "a loop of lookups in one transaction", query: lookup, calls: 5000, meanMS: 0.01, samples: loopTicks(10, "mixed", 0.01, 25), fires: true},
		{name: "not sampled in a transaction", query: lookup, calls: 5000, meanMS: 0.01, samples: loopTicks(10, "idle", 0, 0)},
		{name: "a client that stalls is client-stall's", query: lookup, calls: 5000, meanMS: 0.01, samples: loopTicks(10, "idle in transaction", 3000, 3000)},
		{name: "a slow statement is not a round trip", query: lookup, calls: 5000, meanMS: 5, samples: loopTicks(10, "mixed", 0.01, 25)},
		{name: "few calls", query: lookup, calls: 50, meanMS: 0.01, samples: loopTicks(10, "mixed", 0.01, 25)},
		{name: "seen once", query: lookup, calls: 5000, meanMS: 0.01, samples: loopTicks(1, "mixed", 0.01, 25)},
		{name: "a short transaction", query: lookup, calls: 5000, meanMS: 0.01, samples: loopTicks(10, "mixed", 0.01, 0.2)},
		{name: "no key to batch", query: "SELECT count(*) FROM order_lines WHERE qty > $1", calls: 5000, meanMS: 0.01, samples: loopTicks(10, "mixed", 0.01, 25)},
	} {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := sqlparse.Parse(c.query)
			if err != nil {
				t.Fatal(err)
			}
			st := model.Statement{QueryID: 5, Query: c.query, Parsed: parsed, Role: "app", Calls: c.calls, TotalExecMS: float64(c.calls) * c.meanMS, Rows: c.calls}
			for i := range c.samples {
				c.samples[i].Backends[0].Query = strings.Replace(c.query, "$1", "42", 1)
			}
			s := &model.Snapshot{Database: "shop", Statements: []model.Statement{st}, Sampling: &model.Sampling{Samples: c.samples}}
			fs, _ := nPlusOne(s)
			if !c.fires {
				if len(fs) > 0 {
					t.Fatalf("fired: %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("%d findings", len(fs))
			}
			f := fs[0]
			if f.Experiment == nil || f.Experiment.Kind != model.ExpBatch || f.Experiment.Rewrite != "SELECT id, sku FROM order_lines WHERE id = ANY($1)" || f.Experiment.Column != "id" || f.Experiment.Calls != 100 {
				t.Errorf("%+v", f.Experiment)
			}
		})
	}
	t.Run("not sampled", func(t *testing.T) {
		if _, skips := nPlusOne(&model.Snapshot{}); len(skips) != 1 || !strings.Contains(skips[0].Reason, "not sampled") {
			t.Errorf("%+v", skips)
		}
	})
}
