package model

import (
	"strconv"
	"time"

	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Table is one user table with its size and pg_stat_user_tables counters.
type Table struct {
	OID    uint32
	Schema string
	Name   string
	// Reltuples and RelPages are pg_class's estimates from the last VACUUM or
	// ANALYZE (Reltuples is -1 when the table was never analysed or vacuumed).
	Reltuples float64
	RelPages  int64
	// HeapBytes is the main fork's size (pg_relation_size).
	HeapBytes int64
	// Partitioned is true for a partitioned parent, whose rows live in its
	// partitions.
	Partitioned bool
	// PartitionKey are a partitioned table's key columns, in order (none
	// for a key that is an expression); Partitions counts its leaf
	// partitions.
	PartitionKey []string `json:",omitempty"`
	Partitions   int64    `json:",omitempty"`
	// ExtendedStats are the column sets of its CREATE STATISTICS objects,
	// each sorted and joined by commas ("city,zip").
	ExtendedStats []string `json:",omitempty"`
	// AutovacuumEnabled is false when reloptions say autovacuum_enabled=off.
	AutovacuumEnabled bool
	// KeepsEmptyEnd: reloptions say vacuum_truncate=off, so no VACUUM
	// truncates the table's empty end.
	KeepsEmptyEnd   bool `json:",omitempty"`
	SeqScan         int64
	SeqTupRead      int64
	IdxScan         int64
	Inserted        int64
	Updated         int64
	HOTUpdated      int64
	Deleted         int64
	Live            int64
	Dead            int64
	ModSinceAnalyze int64
	LastVacuum      *time.Time // the later of manual and auto vacuum
	LastAnalyze     *time.Time // the later of manual and auto analyze
	VacuumCount     int64
	AnalyzeCount    int64
	// FrozenAge and MxidAge are how many transactions (multixacts) old
	// its oldest unfrozen row can be: age(relfrozenxid), of the table or
	// its TOAST table, whichever is older, and mxid_age(relminmxid).
	FrozenAge, MxidAge int64
	// FreezeMaxAge is its own autovacuum_freeze_max_age (reloptions); 0
	// when it has none and the server's applies.
	FreezeMaxAge int64
	// VacuumOptions are its own autovacuum_vacuum_* storage parameters,
	// keyed by what follows that prefix (cost_delay in ms, cost_limit,
	// threshold, scale_factor, max_threshold); nil when it has none.
	VacuumOptions map[string]float64 `json:",omitempty"`
}

// QualifiedName is schema.name, quoted where needed by the caller.
func (t Table) QualifiedName() string { return t.Schema + "." + t.Name }

// Index is one index of a user table.
type Index struct {
	Schema    string
	Table     string
	Name      string
	Columns   []string // key columns; "" for an expression
	Desc      []bool   // per key column: DESC
	Include   []string // INCLUDE columns
	Predicate string   // partial index predicate (pg_get_expr), "" if none
	Method    string   // btree, hash, gin, ...
	Unique    bool
	Primary   bool
	Valid     bool
	// Ready says writes maintain it (pg_index.indisready). A concurrent
	// build sets it once the index is built and before it validates it:
	// an invalid index that is not ready failed in its build (a unique
	// one over duplicate keys) and is written by nobody.
	Ready bool
	// Bytes is measured (pg_relation_size) for unique and primary-key
	// indexes, which the key rules judge by size; for the others it is
	// pg_class.relpages x block size, as of the last VACUUM, ANALYZE or
	// CREATE INDEX.
	Bytes int64
	Scans int64
	Def   string // pg_get_indexdef, for expression indexes only
	// AgeXacts is how many transactions the server has started since the
	// index's catalog row was written (its CREATE INDEX, or the REINDEX
	// that last rebuilt it): how long its scan counter has had to count.
	AgeXacts int64
	// ForeignKey says its first key column is a foreign key's first
	// column: the checks of a parent row's delete or key change read it.
	ForeignKey bool
	// PrefixKeys says, per key column, whether the index can serve
	// LIKE 'abc%' on it: a pattern operator class (text_pattern_ops), or
	// a collation that compares as C does.
	PrefixKeys []bool `json:",omitempty"`
	// KeyClasses are, per key column, its operator class and collation
	// ("text_ops en-x-icu", "text_pattern_ops default"): two indexes on
	// the same columns with different ones serve different comparisons.
	KeyClasses []string `json:",omitempty"`
}

// Column is one column of a user table with its planner statistics.
type Column struct {
	Schema string
	Table  string
	// TableOID is the table's pg_class oid, as collect read it (0 in a
	// snapshot built by hand or read back from JSON).
	TableOID uint32 `json:"-"`
	Name     string
	Num      int    // attnum
	Type     string // format_type
	NotNull  bool
	Default  string // pg_get_expr(adbin), "" when none
	Identity bool   // GENERATED ... AS IDENTITY
	// HasStats is false when pg_stats has no row (never analysed or no
	// SELECT privilege on the column).
	HasStats    bool
	NullFrac    float64
	NDistinct   float64 // pg_stats convention: negative = fraction of rows
	Correlation float64
	AvgWidth    int
	// MostCommon are the most common values' frequencies (sum), used to tell
	// how selective an equality is.
	MostCommonFreqSum float64
	// MostCommonFreqMax is the frequency of the most common value (the
	// first of pg_stats' most_common_freqs): with NDistinct, how skewed
	// the column is.
	MostCommonFreqMax float64
	// Collation is the column's collation ("default" for the database's,
	// "" for a type that has none); CLike says it compares as C does (or
	// has none), so a B-tree of the default operator class serves
	// LIKE 'abc%' on it.
	Collation string
	CLike     bool
}

// Skew is how many times more rows the column's most common value holds
// than a value would if every distinct value held as many (1 for a
// uniform column; 0 without statistics). rows is the table's row count,
// for a NDistinct given as a fraction of the rows.
func (c Column) Skew(rows float64) float64 {
	nd := c.NDistinct
	if nd < 0 {
		nd = -nd * rows
	}
	if !c.HasStats || nd <= 0 {
		return 0
	}
	return c.MostCommonFreqMax * nd
}

// LockWait is one sampled backend waiting on a lock.
type LockWait struct {
	QueryID   int64
	Query     string
	WaitEvent string // Lock/transactionid, Lock/tuple, ...
	Samples   int
}

// The shape of a statement (its command, relations, predicates, sort and
// claim) is what the parser reads from its SQL; sqlparse defines those types
// and the model names the two the snapshot and its experiments hold.
type (
	QueryShape = sqlparse.QueryShape
	RelRef     = sqlparse.RelRef
)

// lookup indexes the catalog slices by table so rules, which look tables,
// columns and indexes up inside loops over statements and tables, do not
// scan the whole catalog each time. It is built on first use; snapshots are
// not modified after collection.
type lookup struct {
	byName  map[string][]int // table name -> positions in Tables
	byOID   map[uint32]int
	indexes map[[2]string][]Index
	// columns are the positions in Columns of each table's columns: one
	// entry a table, not a column (680,000 keys of three strings each
	// were a fifth of check's memory at a million relations).
	columns map[[2]string][]int32
}

// index builds the lookup on first use.
func (s *Snapshot) index() *lookup {
	if s.lookup != nil {
		return s.lookup
	}
	l := &lookup{byName: map[string][]int{}, byOID: map[uint32]int{}, indexes: map[[2]string][]Index{}, columns: map[[2]string][]int32{}}
	for i, t := range s.Tables {
		l.byName[t.Name] = append(l.byName[t.Name], i)
		if t.OID != 0 {
			l.byOID[t.OID] = i
		}
	}
	// collect reads a table's indexes together: each run of them is
	// kept as a window on Indexes, not a copy (at a million relations
	// the copies were as large as Indexes). The window's capacity ends
	// with the run, so a table met again later gets an array of its own
	// from append instead of writing over its neighbour.
	for a := 0; a < len(s.Indexes); {
		k := [2]string{s.Indexes[a].Schema, s.Indexes[a].Table}
		b := a + 1
		for b < len(s.Indexes) && s.Indexes[b].Schema == k[0] && s.Indexes[b].Table == k[1] {
			b++
		}
		if prev, ok := l.indexes[k]; ok {
			l.indexes[k] = append(prev, s.Indexes[a:b]...)
		} else {
			l.indexes[k] = s.Indexes[a:b:b]
		}
		a = b
	}
	for i, c := range s.Columns {
		k := [2]string{c.Schema, c.Table}
		l.columns[k] = append(l.columns[k], int32(i))
	}
	s.lookup = l
	return l
}

// TableByOID is the table with that oid, or nil (0 is no table).
func (s *Snapshot) TableByOID(oid uint32) *Table {
	if oid == 0 {
		return nil
	}
	if i, ok := s.index().byOID[oid]; ok {
		return &s.Tables[i]
	}
	return nil
}

// BloatedShare is the part of a table's heap that is not live rows from
// which a scan's time is the bloat's as much as the plan's.
const BloatedShare = 0.5

// DeadShare is the table's dead row versions as a share of all it holds.
func (t *Table) DeadShare() float64 {
	if t.Live+t.Dead <= 0 {
		return 0
	}
	return float64(t.Dead) / float64(t.Live+t.Dead)
}

// BloatShare is how much of the table's heap is not live rows: the larger
// of its dead row versions' share and the free space its pages hold
// beyond what the live rows need, from pg_stats' column widths (a table
// vacuumed after a mass delete has no dead rows left but keeps its
// pages). The width is a lower bound (alignment padding is not counted),
// so the estimate is made only when every column has statistics.
func (s *Snapshot) BloatShare(t *Table) float64 {
	if t == nil {
		return 0
	}
	share := t.DeadShare()
	if t.RelPages <= 0 || t.Live <= 0 {
		return share
	}
	width, cols := 0, 0
	for _, c := range s.Columns {
		if c.Schema != t.Schema || c.Table != t.Name {
			continue
		}
		if !c.HasStats {
			return share
		}
		width += c.AvgWidth
		cols++
	}
	if cols == 0 {
		return share
	}
	// A heap tuple carries a 23-byte header (24 aligned) and a 4-byte
	// line pointer; a page has 8192 bytes less its 24-byte header.
	need := float64(t.Live) * float64(24+4+width) / (8192 - 24)
	if free := 1 - need/float64(t.RelPages); free > share {
		share = free
	}
	return share
}

// Bloated says a scan of the table reads mostly what is not live rows: a
// time measured on it is the bloat's as much as the plan's.
func (s *Snapshot) Bloated(t *Table) bool { return s.BloatShare(t) >= BloatedShare }

// Table finds a table by a reference as written in SQL. An unqualified name
// resolves to the table in "public" if there is one, else to the only table
// of that name (search_path is not known to the rules).
func (s *Snapshot) Table(r RelRef) *Table {
	var found *Table
	n := 0
	for _, i := range s.index().byName[r.Name] {
		t := &s.Tables[i]
		if r.Schema != "" {
			if t.Schema == r.Schema {
				return t
			}
			continue
		}
		if t.Schema == "public" {
			return t
		}
		found = t
		n++
	}
	if n == 1 {
		return found
	}
	return nil
}

// TableIndexes lists the indexes of one table: a window on Indexes,
// to be read, not changed.
func (s *Snapshot) TableIndexes(t *Table) []Index {
	return s.index().indexes[[2]string{t.Schema, t.Name}]
}

// Column finds one column of a table, or nil.
func (s *Snapshot) Column(t *Table, name string) *Column {
	var found *Column
	for _, i := range s.index().columns[[2]string{t.Schema, t.Name}] {
		if s.Columns[i].Name == name {
			found = &s.Columns[i] // the last one read, should a name repeat
		}
	}
	return found
}

// Statement finds a statement by queryid, or nil.
func (s *Snapshot) Statement(id int64) *Statement {
	for i := range s.Statements {
		if s.Statements[i].QueryID == id {
			return &s.Statements[i]
		}
	}
	return nil
}

// CastCatalog holds what the catalogs say about columns a plan compares
// through a cast: the column's type, the indexes that lead with it and
// the right-hand types their operator families accept, and which casts
// are binary-coercible (a relabelling an index sees through).
type CastCatalog struct {
	Columns map[string]CastColumn // by CastKey
	// Binary holds "from>to" for casts pg_cast marks binary-coercible.
	Binary map[string]bool
}

// CastColumn is one column and its single-column-leading indexes.
type CastColumn struct {
	Schema, Table, Column, Type string
	// BaseType is Type without its modifier (character for character(8)),
	// as pg_cast and operator families name types.
	BaseType string
	Indexes  []CastIndex
}

// CastIndex is an index whose first key is the plain column.
type CastIndex struct {
	Name string
	// InputType is the operator class's input type (text for a varchar
	// column's index); Accepts are the right-hand types its operator
	// family has operators for with InputType on the left.
	InputType string
	Accepts   []string
}

// CastKey is the map key for a column; schema may be empty when the plan
// did not print it (no VERBOSE).
func CastKey(schema, table, column string) string { return schema + "." + table + "." + column }

// Lookup finds a column, falling back to any schema when schema is empty
// and exactly one table of that name has the column.
func (c *CastCatalog) Lookup(schema, table, column string) (CastColumn, bool) {
	if c == nil {
		return CastColumn{}, false
	}
	if col, ok := c.Columns[CastKey(schema, table, column)]; ok {
		return col, true
	}
	if schema != "" {
		return CastColumn{}, false
	}
	var found CastColumn
	n := 0
	for _, col := range c.Columns {
		if col.Table == table && col.Column == column {
			found, n = col, n+1
		}
	}
	return found, n == 1
}

// ColumnType is the type of a column as the SQL names it (schema may be
// empty), or "" when the snapshot does not know the column: what a
// parameter compared with it is declared as when PostgreSQL cannot infer
// the parameter's type itself.
func (s *Snapshot) ColumnType(c sqlparse.Column) string {
	t := s.Table(RelRef{Schema: c.Schema, Name: c.Table})
	if t == nil {
		return ""
	}
	if col := s.Column(t, c.Column); col != nil {
		return col.Type
	}
	return ""
}

// Sequence is one sequence (pg_sequences) with the column it feeds, when
// a serial or identity column owns it: the column's type may end the
// numbers sooner than the sequence's own maximum.
type Sequence struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Type   string `json:"type"` // smallint, integer, bigint
	// Last is the last value handed out; nil when the sequence was never
	// used or pgmedic's role may not read it (see Hidden).
	Last      *int64 `json:"last_value,omitempty"`
	Hidden    bool   `json:"hidden,omitempty"`
	Min       int64  `json:"min_value"`
	Max       int64  `json:"max_value"`
	Increment int64  `json:"increment_by"`
	Cycle     bool   `json:"cycle,omitempty"`
	// Table, Column and ColumnType are the column that owns it.
	Table      RelRef `json:"table"`
	Column     string `json:"column,omitempty"`
	ColumnType string `json:"column_type,omitempty"`
	Identity   bool   `json:"identity,omitempty"`
	// LastAfter is Last at the end of check's sampling window and
	// Seconds the server's time between the two readings: the rate at
	// which the application takes numbers.
	LastAfter *int64  `json:"last_value_after,omitempty"`
	Seconds   float64 `json:"seconds,omitempty"`
}

// BlockSize is the server's page size in bytes (8192 unless it was built
// with another), from its settings: relpages times it is a relation's size.
func (s *Snapshot) BlockSize() int64 {
	if n, err := strconv.ParseInt(s.Settings["block_size"].Value, 10, 64); err == nil && n > 0 {
		return n
	}
	return 8192
}
