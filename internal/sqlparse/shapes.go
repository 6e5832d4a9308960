package sqlparse

// QueryShape is what the SQL of a statement says: its command, the
// relations it touches, the predicates and sort order per relation, and for
// queue claims how the rows are locked.
type QueryShape struct {
	Command    string // SELECT, UPDATE, DELETE, INSERT, MERGE, OTHER
	Target     RelRef // the written relation of INSERT/UPDATE/DELETE
	Relations  []RelRef
	Predicates []Predicate
	OrderBy    []OrderColumn
	HasLimit   bool
	SetColumns []string // columns an UPDATE assigns
	Claim      *Claim
}

// RelRef names a relation as written in the SQL (Schema may be empty).
type RelRef struct {
	Schema string
	Name   string
}

// Predicate operators.
const (
	OpEq      = "eq"      // =, IN, = ANY
	OpRange   = "range"   // <, <=, >, >=, BETWEEN
	OpIsNull  = "is-null" // IS NULL
	OpNotNull = "not-null"
	OpOther   = "other" // <>, LIKE, functions: not served by a plain B-tree
)

// Predicate is one column comparison in WHERE, JOIN ... ON or HAVING.
// Rel is empty when an unqualified column could belong to several
// relations.
type Predicate struct {
	Rel    RelRef
	Column string
	Op     string
	// Cast is true when the column itself is wrapped in a cast.
	Cast bool
	// Join is true when the other side of the comparison is a column
	// too (a join condition, or a subquery's link to its outer row):
	// it does not filter the table by a value.
	Join bool
}

// OrderColumn is one ORDER BY item that is a plain column.
type OrderColumn struct {
	Rel    RelRef
	Column string
	Desc   bool
}

// Lock strengths of a claim's row-picking SELECT.
const (
	LockNone       = ""
	LockForUpdate  = "FOR UPDATE"
	LockNoKeyUpd   = "FOR NO KEY UPDATE"
	LockForShare   = "FOR SHARE"
	LockForKeyShr  = "FOR KEY SHARE"
	WaitBlock      = "block"
	WaitSkipLocked = "SKIP LOCKED"
	WaitNoWait     = "NOWAIT"
)

// Claim describes a statement that picks rows with LIMIT in a subquery and
// writes them in the same statement: the shape of a job-queue claim.
type Claim struct {
	Table    RelRef
	Lock     string // LockNone, LockForUpdate, ...
	Wait     string // WaitBlock, WaitSkipLocked, WaitNoWait
	Rewrite  string // the statement with FOR UPDATE SKIP LOCKED in the subquery
	Position string // where the subquery sits: FROM, WHERE, WITH
}
