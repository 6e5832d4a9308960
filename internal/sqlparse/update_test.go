package sqlparse

import (
	"strings"
	"testing"
)

func TestUpdateEveryRow(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = $1 RETURNING id", want: `UPDATE pgmedic_hot jobs SET status = 'done', finished_at = now()`},
		{in: "UPDATE public.jobs j SET attempts = j.attempts + 1, run_at = $2 WHERE j.id = $1", want: `UPDATE pgmedic_hot j SET attempts = j.attempts + 1, run_at = $2`},
		// A join keeps one row of each joined table: the SET list's
		// values come from a real row, and each row is updated once.
		{in: "UPDATE jobs SET status = b.state FROM batches b WHERE b.id = jobs.batch", want: `UPDATE pgmedic_hot jobs SET status = b.state FROM (SELECT * FROM batches LIMIT 1) b`},
		{in: "UPDATE orders o SET total = s.sum FROM (SELECT order_id, sum(amount) FROM lines GROUP BY 1) s, public.fx WHERE s.order_id = o.id", want: `UPDATE pgmedic_hot o SET total = s.sum FROM (SELECT * FROM (SELECT order_id, sum(amount) FROM lines GROUP BY 1) pgmedic_joined LIMIT 1) s, (SELECT * FROM public.fx LIMIT 1) fx`},
		{in: "UPDATE jobs SET status = 'x' FROM batches b JOIN owners w ON w.id = b.owner WHERE b.id = jobs.batch", err: "JOIN"},
		{in: "WITH c AS (SELECT 1) UPDATE jobs SET status = 'x'", err: "WITH"},
		{in: "DELETE FROM jobs", err: "not an UPDATE"},
	} {
		st, err := Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := st.UpdateEveryRow("pgmedic_hot")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || out.Text() != c.want {
			t.Errorf("%s:\n got %v %v\nwant %s", c.in, out, err, c.want)
		}
	}
}

func TestIndexOn(t *testing.T) {
	got, err := IndexOn("CREATE UNIQUE INDEX jobs_open ON public.jobs USING btree (run_at) INCLUDE (id) WHERE (status = 'queued'::text)", "pgmedic_hot_b")
	want := "CREATE UNIQUE INDEX ON pgmedic_hot_b USING btree (run_at) INCLUDE (id) WHERE status = 'queued'::text"
	if err != nil || got != want {
		t.Errorf("got %q %v\nwant %q", got, err, want)
	}
	if _, err := IndexOn("SELECT 1", "x"); err == nil {
		t.Error("a statement that is no index was accepted")
	}
}
