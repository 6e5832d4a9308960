package logs

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestSyslogPieces: messages put back together from syslog records, as
// PostgreSQL sends them and rsyslog writes them.
func TestSyslogPieces(t *testing.T) {
	long := "SELECT " + strings.Repeat("x, ", 400) + "1"
	cases := []struct {
		name, prefix, log string
		want              []Entry
	}{
		{
			name:   "no prefix: time and process from syslog's header",
			prefix: "",
			log: "Mar  3 10:00:01 db1 postgres[41]: [7-1] LOG:  duration: 2.000 ms  statement: SELECT 1\n" +
				"Mar  3 10:00:02 db1 postgres[41]: [8-1] ERROR:  division by zero\n" +
				"Mar  3 10:00:02 db1 postgres[41]: [8-2] STATEMENT:  SELECT 1/0\n",
			want: []Entry{
				{PID: 41, Level: "LOG", Message: "duration: 2.000 ms  statement: SELECT 1", Time: time.Date(2026, 3, 3, 10, 0, 1, 0, time.UTC)},
				{PID: 41, Level: "ERROR", Message: "division by zero", Statement: "SELECT 1/0", Time: time.Date(2026, 3, 3, 10, 0, 2, 0, time.UTC)},
			},
		},
		{
			name:   "interleaved processes, a tab-continued statement, RFC 3339 times",
			prefix: "user=%u,db=%d,app=%a,client=%h ",
			log: "2026-03-03T10:00:01.5+01:00 db1 postgres[41]: [7-1] user=a,db=shop,app=web,client=10.0.0.1 LOG:  duration: 3.000 ms  statement: SELECT *\n" +
				"2026-03-03T10:00:01.5+01:00 db1 postgres[42]: [3-1] user=b,db=shop,app=web,client=10.0.0.2 LOG:  connection authorized: user=b database=shop\n" +
				"2026-03-03T10:00:01.5+01:00 db1 postgres[41]: [7-2] #011FROM t\n",
			want: []Entry{
				{PID: 41, User: "a", Database: "shop", App: "web", Client: "10.0.0.1", Level: "LOG", Message: "duration: 3.000 ms  statement: SELECT *\nFROM t", Time: time.Date(2026, 3, 3, 9, 0, 1, 5e8, time.UTC)},
				{PID: 42, User: "b", Database: "shop", App: "web", Client: "10.0.0.2", Level: "LOG", Message: "connection authorized: user=b database=shop", Time: time.Date(2026, 3, 3, 9, 0, 1, 5e8, time.UTC)},
			},
		},
		{
			name:   "a line cut at 900 bytes, at a space and in a word",
			prefix: "%m [%p] ",
			log: "Mar  3 10:00:01 db1 postgres[41]: [7-1] 2026-03-03 10:00:01.000 UTC [41] LOG:  duration: 1.000 ms  statement: " + long[:600] + "\n" +
				"Mar  3 10:00:01 db1 postgres[41]: [7-2] " + long[600:1000] + "\n" +
				"Mar  3 10:00:01 db1 postgres[41]: [7-3] " + long[1000:] + "\n",
			want: []Entry{{PID: 41, Level: "LOG", Message: "duration: 1.000 ms  statement: " + long, Time: time.Date(2026, 3, 3, 10, 0, 1, 0, time.UTC)}},
		},
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(c.log, "\n"), "\n")
			texts, ok := syslogTexts(lines)
			if !ok || len(texts) == 0 {
				t.Fatalf("not recognised as syslog")
			}
			p, err := CompilePrefix(c.prefix)
			if err != nil {
				t.Fatal(err)
			}
			var got []Entry
			st, err := readSyslogAt(strings.NewReader(c.log), p, func(e Entry) { got = append(got, e) }, now)
			if err != nil || st.Unrecognised != 0 {
				t.Fatalf("%v, %+v", err, st)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d entries: %+v", len(got), got)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("entry %d\n got %+v\nwant %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestSyslogDetect: the format and the prefix inside the records are
// detected; a piece whose first piece is missing is counted, not guessed.
func TestSyslogDetect(t *testing.T) {
	log := "Mar  3 10:00:01 db1 postgres[41]: [7-2] #011FROM t\n" +
		"Mar  3 10:00:01 db1 postgres[41]: [8-1] user=a,db=shop,app=web,client=10.0.0.1 LOG:  checkpoint starting: time\n" +
		"Mar  3 10:00:02 db1 postgres[41]: [9-1] user=a,db=shop,app=web,client=10.0.0.1 LOG:  checkpoint starting: wal\n"
	f, p, err := Detect([]byte(log))
	if err != nil || f != Syslog || p.Text != "user=%u,db=%d,app=%a,client=%h " {
		t.Fatalf("%v %v %v", f, p, err)
	}
	st, err := Read(strings.NewReader(log), f, p, func(Entry) {})
	if err != nil || st.Entries != 2 || st.Unrecognised != 1 {
		t.Fatalf("%+v %v", st, err)
	}
}

func FuzzSyslog(f *testing.F) {
	b, _ := os.ReadFile("testdata/lab/syslog.log")
	f.Add(string(b[:min(len(b), 4000)]))
	f.Add("Mar  3 10:00:01 db1 postgres[41]: [7-1] LOG:  duration: 2.000 ms  statement: SELECT\nMar  3 10:00:01 db1 postgres[41]: [7-2] #011 1\nMar  3 10:00:01 db1 postgres[41]: [7-3]  + 2\n")
	f.Fuzz(func(t *testing.T, text string) {
		// Detection runs on the text itself, as it does on a file's head.
		format, p, err := Detect([]byte(text))
		if err != nil || format != Syslog {
			return
		}
		s := NewSummary()
		st, _ := Read(strings.NewReader(text), format, p, s.Add)
		s.Finish()
		if st.Entries > st.Lines {
			t.Fatalf("%d entries from %d lines", st.Entries, st.Lines)
		}
	})
}
