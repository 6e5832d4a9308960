package logs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzFastPrefix holds the fast prefix matcher to the regexp: whenever
// it matches a line, the regexp matches too, with the same fields.
func FuzzFastPrefix(f *testing.F) {
	lines := []string{
		"2024-05-01 10:00:00.123 UTC [42] app@shop LOG:  duration: 1 ms  statement: SELECT 1",
		"2024-05-01 10:00:00.123 UTC [42] LOG:  checkpoint starting: time",
		"2020-03-11 20:40:43 CET::@:[12760]:LOG:  starting",
		"2020-03-11 20:40:44 CET:[local]:postgres@template1:[12774]:LOG:  duration: 0.027 ms  statement: ",
		"2024-03-01 10:00:00 UTC:10.1.2.3(5000):app@shop:[4242]:ERROR:  x",
		"2022-02-17 16:24:32.956 UTC [731] [queryid=-8112313845396740087] postgres@stackoverflow LOG:  duration: 1.888 ms",
		"2020-06-01 10:00:00 UTC-5ed4d2a4.1a4-LOG:  x",
		"2024-05-01 10:00:00 UTC [1]: [1-1] user=a,db=b,app=psql,client=[local] LOG:  x",
		"1714557600.123 [7] LOG:  x",
	}
	for _, p := range append(append(append([]string{}, knownPrefixes...), carriedPrefixes...), "%n [%p] ", "%m [%p] [queryid=%Q] %u@%d ", "%t-%c-", "%m %e %b %v %x %P %i %a ") {
		for _, l := range lines {
			f.Add(p, l)
		}
	}
	f.Fuzz(func(t *testing.T, prefix, line string) {
		p, err := CompilePrefix(prefix)
		if err != nil || p.fast == nil {
			return
		}
		start, level, msg, ok := splitLevel(line)
		if !ok {
			return
		}
		var fast Entry
		if !p.fast.match(line[:start], &fast, nil) {
			return
		}
		slow, ok := p.parseRegexp(line, start, level, msg)
		if !ok {
			t.Fatalf("prefix %q, line %q: the fast path matched, the regexp did not", prefix, line)
		}
		fast.Level, fast.Message = level, line[msg:]
		if fast != slow {
			t.Fatalf("prefix %q, line %q:\nfast   %+v\nregexp %+v", prefix, line, fast, slow)
		}
	})
}

// TestFastPrefixTaken: on the logs of the lab and of the services, the
// fast path reads nearly every line, so the regexp's cost is gone.
func TestFastPrefixTaken(t *testing.T) {
	for _, c := range []struct{ file, prefix string }{
		{"testdata/lab/stderr.log", "%m [%p] %q%u@%d "},
		{"testdata/formats/rds.log.gz", "%t:%r:%u@%d:[%p]:"},
		{"testdata/formats/queryid.log.gz", "%m [%p] [queryid=%Q] %u@%d "},
	} {
		fh, err := os.Open(filepath.FromSlash(c.file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(fh)
		if err != nil {
			t.Fatal(err)
		}
		b := new(strings.Builder)
		buf := make([]byte, 1<<16)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		fh.Close()
		p, _ := CompilePrefix(c.prefix)
		total, fast := 0, 0
		for _, l := range strings.Split(b.String(), "\n") {
			start, _, _, ok := splitLevel(l)
			if !ok {
				continue
			}
			if _, ok := p.parseRegexp(l, start, "", start); !ok {
				continue
			}
			total++
			var e Entry
			if p.fast.match(l[:start], &e, nil) {
				fast++
			}
		}
		if total == 0 || fast*100 < total*99 {
			t.Errorf("%s: the fast path read %d of %d prefixed lines", c.file, fast, total)
		}
	}
}

// FuzzQuickTime holds the hand-read timestamps to time.Parse's.
func FuzzQuickTime(f *testing.F) {
	for _, v := range []string{"2024-05-01 10:00:00.123 UTC", "2024-05-01 10:00:00 CET", "2024-02-30 10:00:00 UTC", "2024-05-01 10:00:00.5 +02",
		"2024-05-01 23:59:59.999999 -07:00", "2024-05-01 10:00:00.1234567891 UTC", "2024-05-01 24:00:00 UTC", "2024-05-01 10:00:00 +0530"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		want := parseTimeLayouts(v)
		for i := 0; i < 2; i++ { // the first learns the zone, the second uses it
			if got, ok := quickTime(v); ok && !got.Equal(want) {
				t.Fatalf("%q: quick %v, time.Parse %v", v, got, want)
			}
		}
	})
}

// TestPrefixMultibyteLiteral: a prefix with a character of several bytes
// matches by its regexp as by the hand matcher (the regexp once took each
// byte for a character of its own).
func TestPrefixMultibyteLiteral(t *testing.T) {
	p, err := CompilePrefix("%m » [%p] ")
	if err != nil {
		t.Fatal(err)
	}
	line := "2024-05-01 10:00:00.123 UTC » [42] LOG:  duration: 1 ms  statement: SELECT 1"
	start, level, msg, _ := splitLevel(line)
	if e, ok := p.parseRegexp(line, start, level, msg); !ok || e.PID != 42 {
		t.Errorf("the regexp read %+v, %v", e, ok)
	}
}

// FuzzSecondCache holds a reader's cached seconds to time.Parse, over
// two timestamps read in turn (the same second, the next, another zone).
func FuzzSecondCache(f *testing.F) {
	f.Add("2024-05-01 10:00:00.123 UTC", "2024-05-01 10:00:00.9 UTC")
	f.Add("2024-05-01 10:00:00.123 UTC", "2024-05-01 10:00:00.123 +02")
	f.Add("2024-05-01 10:00:00 CET", "2024-05-01 10:00:01.5 CET")
	f.Add("2024-05-01 10:00:00 UTC", "2024-05-01 10:00:00. UTC") // a dot with no digits: time.Parse refuses it
	f.Fuzz(func(t *testing.T, a, b string) {
		c := &secondCache{}
		for _, v := range []string{a, b, a, b} {
			if got, want := c.time(v), parseTimeLayouts(v); !got.Equal(want) {
				t.Fatalf("%q after the cache held %q: %v, time.Parse %v", v, c.sec, got, want)
			}
		}
	})
}
