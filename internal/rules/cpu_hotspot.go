package rules

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// CPUHotspotID is the rule that reads a CPU profile.
const CPUHotspotID = "cpu-hotspot"

// Thresholds of cpu-hotspot: a kind is reported when at least this share
// of the samples ran in it (inclusive: anywhere in the stack, as wide as
// it shows in the flame graph), from enough samples to mean something.
const (
	hotspotMinShare      = 0.10
	hotspotCriticalShare = 0.40
	hotspotMinSamples    = 20
)

// HotKind is one kind of hot spot: the frames that make it, what it
// usually means, and the fix.
type HotKind struct {
	ID, Name string
	// Frame says whether a frame belongs to the kind.
	Frame func(f model.Frame) bool
	Means string
	Fix   string
	SQL   string
	// Quiet kinds are measured and shown but never a finding (an
	// allocator that is already the fix).
	Quiet bool
}

func symIn(names ...string) func(model.Frame) bool {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return func(f model.Frame) bool { return set[f.Sym] }
}

func symPrefix(prefixes ...string) func(model.Frame) bool {
	return func(f model.Frame) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(f.Sym, p) {
				return true
			}
		}
		return false
	}
}

func anyOf(fs ...func(model.Frame) bool) func(model.Frame) bool {
	return func(f model.Frame) bool {
		for _, g := range fs {
			if g(f) {
				return true
			}
		}
		return false
	}
}

func inDSO(parts ...string) func(model.Frame) bool {
	return func(f model.Frame) bool {
		for _, p := range parts {
			if strings.Contains(f.DSO, p) {
				return true
			}
		}
		return false
	}
}

// glibcMalloc is glibc's allocator: its entry points and internals, in
// libc itself (a preloaded jemalloc exports malloc and free too).
func glibcMalloc(f model.Frame) bool {
	if !strings.Contains(f.DSO, "libc.so") && !strings.Contains(f.DSO, "libc-") {
		return false
	}
	switch f.Sym {
	case "malloc", "free", "calloc", "realloc", "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "sysmalloc",
		"malloc_consolidate", "__lll_lock_wait_private", "__malloc_arena_thread_freeres":
		return true
	}
	return strings.HasPrefix(f.Sym, "_int_") || strings.HasPrefix(f.Sym, "cfree") || strings.HasPrefix(f.Sym, "unlink_chunk") ||
		strings.HasPrefix(f.Sym, "arena_") || strings.HasPrefix(f.Sym, "tcache_") || strings.HasPrefix(f.Sym, "__GI___libc_malloc") ||
		strings.HasPrefix(f.Sym, "__GI___libc_free")
}

// crossTimestamp is PostgreSQL's comparisons and arithmetic between
// timestamp and timestamptz, each of which converts through the time-zone
// rules.
func crossTimestamp(f model.Frame) bool {
	s := f.Sym
	return (strings.HasPrefix(s, "timestamp_") && strings.Contains(s, "timestamptz")) ||
		(strings.HasPrefix(s, "timestamptz_") && strings.HasSuffix(s, "_timestamp"))
}

// LocaleCompare is text compared under a linguistic collation: libc's
// strcoll and strxfrm (an en_US.UTF-8 database), ICU's collator (an ICU
// locale: ucol_* in C, icu_NN:: in C++, versioned by ICU's major), and
// PostgreSQL's wrappers that call them. A sort under COLLATE "C" compares
// bytes and shows none of these.
func LocaleCompare(f model.Frame) bool {
	s := f.Sym
	switch s {
	case "varstrfastcmp_locale":
		return true
	}
	for _, p := range []string{"strcoll", "__strcoll", "strxfrm", "__strxfrm", "ucol_", "pg_strcoll", "pg_strncoll", "pg_strxfrm", "pg_strnxfrm",
		"_ZN6icu_", "_ZNK6icu_", "icu_"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.Contains(f.DSO, "libicui18n")
}

// CollationEvidence labels the share of a profile's samples that
// compared text under a linguistic collation, on a sort hot spot.
const CollationEvidence = "share comparing text under a linguistic collation"

// CollationShare is the share of a profile's samples that compared text
// under a linguistic collation.
func CollationShare(p model.Profile) float64 {
	var n int64
	for _, s := range p.Stacks {
		for _, f := range s.Frames {
			if LocaleCompare(f) {
				n += s.Count
				break
			}
		}
	}
	if p.Samples == 0 {
		return 0
	}
	return model.Round(float64(n)/float64(p.Samples), 4)
}

// HotKinds are the kinds cpu-hotspot names, most specific first.
var HotKinds = []HotKind{
	{ID: "jit", Name: "JIT compilation (LLVM)", Frame: anyOf(inDSO("libLLVM", "llvmjit"), symPrefix("llvm", "LLVM", "_ZN4llvm", "_ZNK4llvm")),
		Means: "the backend compiles each query with LLVM; for short queries the compilation costs more than it saves",
		Fix:   "turn JIT off for the OLTP role, or raise jit_above_cost above the statements' plan costs", SQL: "ALTER ROLE <app role> SET jit = off;"},
	{ID: "timezone", Name: "time-zone conversion", Frame: anyOf(crossTimestamp, symIn("pg_next_dst_boundary", "DetermineTimeZoneOffset",
		"DetermineTimeZoneOffsetInternal", "DetermineTimeZoneAbbrevOffset", "DetermineTimeZoneAbbrevOffsetTS", "timestamp2tm", "tm2timestamp",
		"timestamp2timestamptz_opt_overflow", "timestamptz2timestamp", "timestamptz_pl_interval", "timestamptz_mi_interval",
		"pg_localtime", "localsub", "timesub", "pg_interpret_timezone_abbrev")),
		Means: "values are converted between timestamp and timestamptz row by row: a timestamp column compared with a timestamptz value (now(), CURRENT_TIMESTAMP) goes through the time-zone rules for every row",
		Fix:   "compare the column with a value of its own type computed once: for a timestamp column, (SELECT (now() - interval '1 day')::timestamp) is evaluated once where now() - interval '1 day' is evaluated and converted for every row of a scan; or store timestamptz"},
	{ID: "numeric-float", Name: "numeric/float conversion", Frame: symIn("numeric_float8", "numeric_float4", "numeric_float8_no_overflow", "float8_numeric",
		"float4_numeric", "float8in", "float8in_internal", "float4in", "float8out", "float8out_internal", "numeric_in", "numeric_out",
		"strtod", "__strtod_internal", "____strtod_l_internal", "__strtod_l", "strtof", "set_var_from_str", "get_str_from_var",
		"int4_numeric", "int8_numeric", "numeric_int4", "numeric_int8", "int64_to_numeric"),
		Means: "values are converted between numeric and float (or parsed from and printed to text) row by row: an expression that mixes numeric and double precision, such as a CASE with a float8 branch over a numeric column, converts every row",
		Fix:   "keep the expression in one type: write the constant as numeric (1.1, not 1.1::float8), or cast the float8 operand to numeric once; compare columns with values of their own type"},
	{ID: "spinlock", Name: "spin locks and LWLock contention", Frame: symIn("s_lock", "perform_spin_delay", "LWLockAcquire", "LWLockAttemptLock",
		"LWLockWaitListLock", "LWLockRelease", "LWLockQueueSelf", "native_queued_spin_lock_slowpath", "queued_spin_lock_slowpath",
		"__pv_queued_spin_lock_slowpath", "_raw_spin_lock", "_raw_spin_lock_irqsave", "__lll_lock_wait"),
		Means: "backends spin or queue on the same shared-memory lock: too many active sessions for the cores, or one hot lock (a buffer mapping partition, the WAL insert lock, the lock manager)",
		Fix:   "fewer active sessions than cores (a connection pool), and find the lock from the wait events (LWLock:*) in pg_stat_activity"},
	{ID: "glibc-malloc", Name: "memory allocation (glibc malloc)", Frame: glibcMalloc,
		Means: "the process spends its CPU in glibc's malloc and free; with several threads their arenas contend, and freeing memory another thread allocated takes the arena's lock",
		Fix:   "preload a thread-caching allocator (LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2, Debian's libjemalloc2, or tcmalloc), or allocate less per request"},
	{ID: "other-allocator", Name: "memory allocation (jemalloc, tcmalloc, mimalloc)", Frame: inDSO("jemalloc", "tcmalloc", "mimalloc"),
		Means: "the time the preloaded allocator takes", Quiet: true},
	{ID: "memory-contexts", Name: "PostgreSQL memory contexts", Frame: symIn("AllocSetAlloc", "AllocSetFree", "AllocSetRealloc", "AllocSetReset",
		"AllocSetDelete", "palloc", "palloc0", "pfree", "repalloc", "MemoryContextAlloc", "MemoryContextAllocZero", "MemoryContextReset",
		"MemoryContextDelete", "GenerationAlloc", "SlabAlloc"),
		Means: "the statement allocates and frees memory for every row (detoasting, text built per row, casts)",
		Fix:   "look at what the statement computes per row: casts, string building, detoasting large values it does not need"},
	{ID: "sort", Name: "sorting and collation", Frame: anyOf(LocaleCompare, symPrefix("qsort_", "tuplesort_", "comparetup_", "bttextcmp", "varstr_cmp"),
		symIn("ApplySortComparator", "pg_qsort", "varstrfastcmp_c")),
		Means: "sorting, and comparing text under a locale's collation",
		Fix:   "an index that returns rows in the ORDER BY's order, a smaller sort, or COLLATE \"C\" where linguistic order is not needed"},
	{ID: "hash", Name: "hashing", Frame: anyOf(symPrefix("hash_bytes", "hash_any", "hash_uint32", "tuplehash_", "ExecHashTable", "ExecScanHashBucket", "LookupTupleHashEntry"),
		symIn("hash_search", "hash_search_with_hash_value", "ExecHashGetHashValue")),
		Means: "hash joins and hash aggregates building and probing their tables",
		Fix:   "check the join's row estimates (a hash built on the large side) and work_mem"},
	{ID: "checksum-compression", Name: "checksums and compression", Frame: anyOf(symPrefix("pg_checksum_", "pglz_", "LZ4_", "ZSTD_", "pg_comp_crc32c"), symIn("deflate", "inflate")),
		Means: "page checksums and TOAST (de)compression",
		Fix:   "read fewer pages (an index), or compress TOAST with lz4 (ALTER TABLE ... ALTER COLUMN ... SET COMPRESSION lz4) instead of pglz"},
	{ID: "page-faults", Name: "page faults", Frame: symIn("asm_exc_page_fault", "exc_page_fault", "do_page_fault", "handle_mm_fault", "__handle_mm_fault"),
		Means: "memory touched for the first time: new processes (connection churn), shared buffers not yet mapped, huge allocations",
		Fix:   "keep connections (a pool), use huge_pages for shared_buffers, and look for statements that allocate large memory (work_mem sorts and hashes)"},
	{ID: "expression", Name: "expression evaluation", Frame: symPrefix("ExecInterpExpr", "ExecEvalExpr", "ExecEval", "ExecQual", "ExecProject"),
		Means: "evaluating the statement's expressions row by row",
		Fix:   "filter earlier (an index), compute less per row; JIT only pays off for long queries"},
}

// KindShare is one kind's part of a profile.
type KindShare struct {
	Kind    *HotKind
	Samples int64
	Share   float64
	// Frames are the kind's frames that were hottest (self samples).
	Frames []string
	// Statements are the statements whose samples had the kind, most
	// first.
	Statements []StatementShare
}

// StatementShare is a statement's samples within a kind.
type StatementShare struct {
	QueryID, Query string
	Samples        int64
}

// ProfileShares measures every kind's inclusive share of a profile: the
// samples with at least one of its frames anywhere in their stack.
func ProfileShares(p model.Profile) []KindShare {
	out := make([]KindShare, len(HotKinds))
	frames := make([]map[string]int64, len(HotKinds))
	stmts := make([]map[string]*StatementShare, len(HotKinds))
	for i := range HotKinds {
		out[i].Kind = &HotKinds[i]
		frames[i], stmts[i] = map[string]int64{}, map[string]*StatementShare{}
	}
	for _, s := range p.Stacks {
		for i, k := range HotKinds {
			hit := ""
			for _, f := range s.Frames {
				if k.Frame(f) {
					hit = f.Sym
					break // the leaf-most frame of the kind
				}
			}
			if hit == "" {
				continue
			}
			out[i].Samples += s.Count
			frames[i][hit] += s.Count
			if s.QueryID != "" {
				st := stmts[i][s.QueryID]
				if st == nil {
					st = &StatementShare{QueryID: s.QueryID, Query: s.Query}
					stmts[i][s.QueryID] = st
				}
				st.Samples += s.Count
			}
		}
	}
	for i := range out {
		if p.Samples > 0 {
			out[i].Share = model.Round(float64(out[i].Samples)/float64(p.Samples), 4)
		}
		for name := range frames[i] {
			out[i].Frames = append(out[i].Frames, name)
		}
		sort.Slice(out[i].Frames, func(a, b int) bool {
			fa, fb := frames[i][out[i].Frames[a]], frames[i][out[i].Frames[b]]
			return fa > fb || fa == fb && out[i].Frames[a] < out[i].Frames[b]
		})
		for _, st := range stmts[i] {
			out[i].Statements = append(out[i].Statements, *st)
		}
		sort.Slice(out[i].Statements, func(a, b int) bool { return out[i].Statements[a].Samples > out[i].Statements[b].Samples })
	}
	return out
}

// cpuHotspot names the kinds that took at least a tenth of a profile's
// samples, with what they mean and the fix, attributed to the statement
// that ran them most.
func cpuHotspot(p model.Profile) []model.Finding {
	var out []model.Finding
	for _, ks := range ProfileShares(p) {
		k := ks.Kind
		if k.Quiet || ks.Samples < hotspotMinSamples || ks.Share < hotspotMinShare {
			continue
		}
		sev := model.Warning
		if ks.Share >= hotspotCriticalShare {
			sev = model.Critical
		}
		obj := model.Object{Kind: "process", Name: p.Target}
		var exp *model.Experiment
		title := fmt.Sprintf("%s takes %.0f%% of the CPU samples of %s", k.Name, 100*ks.Share, p.Target)
		if len(ks.Statements) > 0 {
			top := ks.Statements[0]
			obj = model.Object{Kind: "statement", Name: printable.Shorten(top.Query, 120), QueryID: top.QueryID}
			title = fmt.Sprintf("%s takes %.0f%% of the CPU samples, %.0f%% of them in one statement", k.Name, 100*ks.Share, 100*float64(top.Samples)/float64(ks.Samples))
			// The statement is re-run with the fix (verify), with the
			// text pg_stat_activity showed for this queryid.
			if qid, err := strconv.ParseInt(top.QueryID, 10, 64); err == nil && qid != 0 {
				exp = &model.Experiment{Kind: model.ExpHotspot, QueryID: qid, Hotspot: k.ID}
			}
		}
		evidence := []model.Evidence{ev("share of the samples", 100*ks.Share, "%"), ev("samples", float64(ks.Samples), ""), ev("samples in the profile", float64(p.Samples), "")}
		if p.SampleMS > 0 {
			evidence = append(evidence, ev("CPU time in it", float64(ks.Samples)*p.SampleMS, "ms"))
		}
		if k.ID == "sort" {
			evidence = append(evidence, ev(CollationEvidence, 100*CollationShare(p), "%"))
		}
		for i, fr := range ks.Frames {
			if i == 3 {
				break
			}
			evidence = append(evidence, model.Evidence{Label: "hot frame = " + fr, Value: 1, Fact: true})
		}
		fix := model.Fix{Summary: k.Fix, SQL: k.SQL}
		out = append(out, model.Finding{Rule: CPUHotspotID, Severity: sev, Title: title, Object: obj, Evidence: evidence,
			Impact:       model.Impact{Summary: k.Means, Share: ks.Share},
			Fix:          fix,
			Verification: model.NotRunBecause("measured by perf's samples; the shares are the flame graph's widths"),
			Experiment:   exp,
			Docs:         docsPath(CPUHotspotID)})
	}
	return out
}

// HotspotShare is one kind's share of a profile's samples.
func HotspotShare(kind string) func(model.Profile) float64 {
	return func(p model.Profile) float64 {
		for _, k := range ProfileShares(p) {
			if k.Kind.ID == kind {
				return k.Share
			}
		}
		return 0
	}
}
