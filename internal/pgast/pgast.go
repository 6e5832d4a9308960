// Package pgast holds PostgreSQL's raw parse tree, as libpg_query (the
// server's own grammar, compiled in) returns it, and the calls into that
// parser: Parse, Deparse, Normalize, Scan, SplitWithParser.
//
// The tree's types (nodes.go) are written by scripts/treegen from
// pg_query_go's pg_query.proto with the same names, fields and getters as
// pg_query_go's, but as plain structs that decode and encode the protobuf
// wire format themselves. pg_query_go's own types register every message
// with the protobuf runtime when the process starts, which cost each
// pgmedic command 3.4 million instructions (more than a whole `explain`
// of a small plan) whether it parsed SQL or not; these cost nothing until
// a statement is parsed. Only package sqlparse imports pgast.
package pgast

import (
	"bytes"
	"fmt"

	"github.com/pganalyze/pg_query_go/v6/parser"
)

// Message is a node of the tree: a pointer to one of the generated types
// (*SelectStmt, *A_Expr, ...), which a walk tells apart by a type switch.
//
// It is any, not an interface of the generated methods, and a Node holds
// its member itself, not in a wrapper type: every pairing of a concrete
// type with an interface that the code converts between statically is a
// table entry (an itab) that Go's runtime registers when any process
// starts. The 270 generated types, each as a Message and as a Node
// member, were 538 of pgmedic's 1,589 entries, paid by every command,
// SQL or not. Functions here reach the methods by a type assertion at
// run time, whose entry is made on first use.
type Message = any

// node is what every generated type implements.
type node interface {
	eachChild(fn func(Message) bool) bool
	marshal(b []byte) []byte
	unmarshal(b []byte) error
	Clear(name string)
	NodeType() string
}

// asNode is m's generated methods, or nil when m is not a generated type
// (a nil Message among them).
func asNode(m Message) node {
	n, _ := m.(node)
	return n
}

// Parse parses one or more SQL statements into their raw parse trees.
// Its error is the parser's (*parser.Error, with the cursor position).
func Parse(sql string) (*ParseResult, error) {
	b, err := parser.ParseToProtobuf(sql)
	if err != nil {
		return nil, err
	}
	tree := &ParseResult{}
	if err := tree.unmarshal(b); err != nil {
		return nil, err
	}
	return tree, nil
}

// Deparse writes a tree back as SQL, by PostgreSQL's rules of what needs
// parentheses and quoting (libpg_query's deparser).
func Deparse(tree *ParseResult) (string, error) {
	return parser.DeparseFromProtobuf(tree.marshal(nil))
}

// Scan splits SQL into the grammar's tokens.
func Scan(sql string) (*ScanResult, error) {
	b, err := parser.ScanToProtobuf(sql)
	if err != nil {
		return nil, err
	}
	r := &ScanResult{}
	if err := r.unmarshal(b); err != nil {
		return nil, err
	}
	return r, nil
}

// Fingerprint is libpg_query's fingerprint of a statement: the same for
// statements that differ only in their constants, as hex.
func Fingerprint(sql string) (string, error) { return parser.FingerprintToHexStr(sql) }

// Normalize replaces each constant in SQL with $n, as pg_stat_statements
// does.
func Normalize(sql string) (string, error) { return parser.Normalize(sql) }

// SplitWithParser splits a script into its statements by the grammar.
func SplitWithParser(sql string, trimSpace bool) ([]string, error) {
	return parser.SplitWithParser(sql, trimSpace)
}

// Inner is the message a Node holds, or nil.
func (x *Node) Inner() Message {
	var found Message
	x.eachChild(func(m Message) bool {
		found = m
		return false
	})
	return found
}

// MakeStrNode is a String node, as an identifier's part is.
func MakeStrNode(s string) *Node { return &Node{Node: &String{Sval: s}} }

// MakeSimpleDefElemNode is an option (name = arg) of a statement's
// option list, as the grammar builds it.
func MakeSimpleDefElemNode(name string, arg *Node, location int32) *Node {
	return &Node{Node: &DefElem{Defname: name, Arg: arg, Defaction: DefElemAction_DEFELEM_UNSPEC, Location: location}}
}

// EachChild calls fn on every message m holds, in the order pg_query.proto
// declares its fields (a list's elements in order), and stops when fn
// returns false. The order is fixed: what walks find (relations, callees)
// reaches the server in it.
func EachChild(m Message, fn func(Message) bool) bool {
	if n := asNode(m); n != nil {
		return n.eachChild(fn)
	}
	return true
}

// NodeType is m's name in pg_query.proto (SelectStmt, A_Expr, ...): for a
// parse node, the server's name of its type. It is "" for what is not a
// node.
func NodeType(m Message) string {
	if n := asNode(m); n != nil {
		return n.NodeType()
	}
	return ""
}

// Clear sets m's scalar field of that pg_query.proto name to its zero
// value, if m has it.
func Clear(m Message, name string) {
	if n := asNode(m); n != nil {
		n.Clear(name)
	}
}

// Equal says whether two trees are the same: their encodings are, since
// each type writes its fields in one order and leaves zero values out.
func Equal(a, b Message) bool { return bytes.Equal(Marshal(a), Marshal(b)) }

// Marshal is m in protobuf's wire format, as pg_query_go would write it.
func Marshal(m Message) []byte {
	if n := asNode(m); n != nil {
		return n.marshal(nil)
	}
	return nil
}

// Unmarshal reads m from protobuf's wire format.
func Unmarshal(b []byte, m Message) error {
	n := asNode(m)
	if n == nil {
		return fmt.Errorf("pgast: %T is not a node of the tree", m)
	}
	return n.unmarshal(b)
}
