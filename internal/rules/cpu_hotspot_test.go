package rules

import (
	"os"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
)

func stack(n int64, qid string, frames ...model.Frame) model.ProfileStack {
	return model.ProfileStack{Frames: frames, Count: n, QueryID: qid, Query: "SELECT ..."}
}

func pgf(sym string) model.Frame {
	return model.Frame{Sym: sym, DSO: "/usr/lib/postgresql/15/bin/postgres"}
}
func libc(sym string) model.Frame {
	return model.Frame{Sym: sym, DSO: "/usr/lib/x86_64-linux-gnu/libc.so.6"}
}
func jemal(sym string) model.Frame {
	return model.Frame{Sym: sym, DSO: "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}
}

// TestCPUHotspotKinds: each kind from the frames that make it, its share
// inclusive, attributed to the statement that ran it; quiet below a
// tenth of the samples and for an allocator that is already the fix.
func TestCPUHotspotKinds(t *testing.T) {
	for _, c := range []struct {
		name   string
		stacks []model.ProfileStack
		want   string // kind:severity ...
	}{
		{"time zones", []model.ProfileStack{stack(60, "7", pgf("[unknown]"), pgf("timestamp2tm"), pgf("timestamptz_mi_interval"), pgf("ExecScan")), stack(40, "7", pgf("ExecScan"))}, "time-zone conversion:critical"},
		{"cross-type comparison", []model.ProfileStack{stack(25, "7", pgf("timestamp_gt_timestamptz"), pgf("ExecScan")), stack(75, "", pgf("ExecScan"))}, "time-zone conversion:warning"},
		{"numeric to float", []model.ProfileStack{stack(50, "9", pgf("numeric_float8"), pgf("ExecScan")), stack(50, "9", pgf("ExecAgg"))}, "numeric/float conversion:critical"},
		{"JIT", []model.ProfileStack{stack(90, "1", model.Frame{Sym: "[unknown]", DSO: "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"}, pgf("jit_compile_expr")), stack(10, "1", pgf("ExecScan"))}, "JIT compilation (LLVM):critical"},
		{"glibc malloc", []model.ProfileStack{stack(70, "", libc("_int_free"), model.Frame{Sym: "work", DSO: "/tmp/churn"}), stack(30, "", model.Frame{Sym: "work", DSO: "/tmp/churn"})}, "memory allocation (glibc malloc):critical"},
		{"jemalloc is quiet", []model.ProfileStack{stack(70, "", jemal("free"), model.Frame{Sym: "work", DSO: "/tmp/churn"}), stack(30, "", model.Frame{Sym: "work", DSO: "/tmp/churn"})}, ""},
		{"spin locks", []model.ProfileStack{stack(30, "", pgf("s_lock"), pgf("LWLockAcquire")), stack(70, "", pgf("ExecScan"))}, "spin locks and LWLock contention:warning"},
		{"below a tenth", []model.ProfileStack{stack(9, "", pgf("numeric_float8")), stack(91, "", pgf("ExecScan"))}, ""},
		{"too few samples", []model.ProfileStack{stack(5, "", pgf("numeric_float8")), stack(5, "", pgf("ExecScan"))}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := model.Profile{Target: "pid 1"}
			for _, s := range c.stacks {
				p.Samples += s.Count
			}
			p.Stacks = c.stacks
			var got []string
			for _, f := range cpuHotspot(p) {
				got = append(got, strings.SplitN(f.Title, " takes ", 2)[0]+":"+f.Severity.String())
				if f.Fix.Summary == "" || f.Impact.Summary == "" {
					t.Errorf("incomplete finding %+v", f)
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestCPUHotspotOnRealProfiles: perf's own samples of a program that
// allocates on eight threads, with glibc malloc and with jemalloc
// preloaded, and of a backend comparing a timestamp column with now().
func TestCPUHotspotOnRealProfiles(t *testing.T) {
	read := func(name string) model.Profile {
		f, err := os.Open("../profile/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := profile.NewBuilder(name)
		if _, err := profile.ReadScript(f, b.Add); err != nil {
			t.Fatal(err)
		}
		return b.Profile(1)
	}
	share := func(p model.Profile, id string) float64 {
		for _, k := range ProfileShares(p) {
			if k.Kind.ID == id {
				return k.Share
			}
		}
		return -1
	}
	glibc, jemalloc, tz := read("glibc.perf.txt"), read("jemalloc.perf.txt"), read("tz.perf.txt")
	if s := share(glibc, "glibc-malloc"); s < 0.4 || len(cpuHotspot(glibc)) == 0 {
		t.Errorf("glibc: allocator share %.2f, findings %v", s, cpuHotspot(glibc))
	}
	if fs := cpuHotspot(jemalloc); len(fs) != 0 || share(jemalloc, "other-allocator") <= 0 {
		t.Errorf("jemalloc: share %.2f, findings %v", share(jemalloc, "other-allocator"), fs)
	}
	if s := share(tz, "timezone"); s < 0.1 {
		t.Errorf("time zones: %.2f", s)
	}
}

// TestCollationShare: text compared under libc's or ICU's collation
// counts, a sort that compares bytes (COLLATE "C") or numbers does not.
func TestCollationShare(t *testing.T) {
	icu := func(sym string) model.Frame {
		return model.Frame{Sym: sym, DSO: "/usr/lib/x86_64-linux-gnu/libicui18n.so.72"}
	}
	for _, c := range []struct {
		name   string
		stacks []model.ProfileStack
		want   float64
	}{
		{"libc strcoll", []model.ProfileStack{stack(40, "1", libc("__strcoll_l"), pgf("varstr_cmp"), pgf("tuplesort_performsort")), stack(60, "1", pgf("ExecScan"))}, 0.4},
		{"ICU's collator by name", []model.ProfileStack{stack(30, "1", model.Frame{Sym: "ucol_strcollUTF8_72"}, pgf("varstr_cmp")), stack(70, "1", pgf("qsort_tuple"))}, 0.3},
		{"ICU's C++ inside its library", []model.ProfileStack{stack(25, "1", icu("[unknown]"), pgf("pg_strnxfrm_prefix")), stack(75, "1", pgf("ExecScan"))}, 0.25},
		{"byte comparison", []model.ProfileStack{stack(50, "1", pgf("varstrfastcmp_c"), pgf("qsort_tuple")), stack(50, "1", pgf("ExecScan"))}, 0},
		{"integer sort", []model.ProfileStack{stack(90, "1", pgf("ssup_datum_int32_cmp"), pgf("qsort_tuple"))}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := model.Profile{Stacks: c.stacks}
			for _, s := range c.stacks {
				p.Samples += s.Count
			}
			if got := CollationShare(p); got != c.want {
				t.Errorf("CollationShare = %v, want %v", got, c.want)
			}
			found := cpuHotspot(p)
			if c.want > 0 && (len(found) == 0 || !strings.Contains(found[0].Title, "sorting and collation")) {
				t.Errorf("no sort hot spot: %+v", found)
			}
		})
	}
}
