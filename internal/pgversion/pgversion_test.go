package pgversion

import (
	"reflect"
	"testing"
)

// TestTable: one row per supported major, oldest first, and nothing a
// version has is lost by the next one.
func TestTable(t *testing.T) {
	if Table[0].Major != Oldest || Table[len(Table)-1].Major != Newest || len(Table) != Newest-Oldest+1 {
		t.Fatalf("the table covers %d to %d in %d rows", Table[0].Major, Table[len(Table)-1].Major, len(Table))
	}
	for i := 1; i < len(Table); i++ {
		prev, cur := reflect.ValueOf(Table[i-1]), reflect.ValueOf(Table[i])
		if Table[i].Major != Table[i-1].Major+1 {
			t.Errorf("row %d is %d after %d", i, Table[i].Major, Table[i-1].Major)
		}
		for f := 0; f < cur.NumField(); f++ {
			if prev.Field(f).Kind() == reflect.Bool && prev.Field(f).Bool() && !cur.Field(f).Bool() {
				t.Errorf("PostgreSQL %d lost %s", Table[i].Major, cur.Type().Field(f).Name)
			}
		}
	}
}

func TestOf(t *testing.T) {
	for _, c := range []struct {
		num   int
		major int
		qid   bool
	}{
		{130023, 13, false}, {140023, 14, true}, {180004, 18, true},
		{190000, 19, true},  // newer than the table: the newest's features
		{120000, 12, false}, // older: the oldest's
		{0, 18, true},       // unknown: the newest's
	} {
		h := Of(c.num)
		if h.Major != c.major || h.QueryIDInActivity != c.qid {
			t.Errorf("Of(%d) = major %d, query_id %v", c.num, h.Major, h.QueryIDInActivity)
		}
	}
	if ok, _ := Supported(120000); ok {
		t.Error("12 supported")
	}
	if ok, why := Supported(170004); !ok || why != "" {
		t.Errorf("17: %v %q", ok, why)
	}
	if got := ForMajor(13).Lacks("pg_stat_activity.query_id", 14); got != "PostgreSQL 13 has no pg_stat_activity.query_id (it arrived in 14)" {
		t.Errorf("Lacks: %q", got)
	}
}
