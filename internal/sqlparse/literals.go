package sqlparse

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// Literals finds the values an application sent for a statement that
// pg_stat_statements normalised: given the normalised text ($1, $2 where
// constants were) and the same statement as a client sent it with its
// literals (what pg_stat_activity shows for simple-protocol clients), it
// returns each $n's literal as SQL ('queued', 20, '5 minutes').
//
// pg_stat_statements copies the text between constants as it is, so the
// two token streams line up one to one, except that a negative number is
// one constant ($n) but two tokens (- 5). A $n the client bound is a $n in
// both texts, and gets no value. Any other difference means the texts are
// not the same statement, and ok is false.
func Literals(normalised, literal string) (values map[int]string, ok bool) {
	a, err := pgast.Scan(normalised)
	if err != nil {
		return nil, false
	}
	b, err := pgast.Scan(literal)
	if err != nil {
		return nil, false
	}
	values = map[int]string{}
	j := 0
	for _, t := range a.Tokens {
		if j >= len(b.Tokens) {
			return nil, false
		}
		u := b.Tokens[j]
		if t.Token == pgast.Token_PARAM {
			n, err := strconv.Atoi(strings.TrimPrefix(normalised[t.Start:t.End], "$"))
			if err != nil || n < 1 {
				return nil, false
			}
			start, end := u.Start, u.End
			if u.Token == pgast.Token_PARAM {
				// A parameter the client bound (the extended protocol's
				// text, as pg_stat_activity and auto_explain show it): its
				// value is not in the text, the constants beside it are.
				j++
				continue
			}
			if u.Token == pgast.Token_ASCII_45 && j+1 < len(b.Tokens) && isNumber(b.Tokens[j+1].Token) {
				j++
				end = b.Tokens[j].End
			}
			if !isConstant(b.Tokens[j].Token) {
				return nil, false
			}
			values[n] = literal[start:end]
			j++
			continue
		}
		if t.Token != u.Token || !strings.EqualFold(normalised[t.Start:t.End], literal[u.Start:u.End]) {
			return nil, false
		}
		j++
	}
	if j != len(b.Tokens) || len(values) == 0 {
		return nil, false
	}
	return values, true
}

func isNumber(t pgast.Token) bool {
	return t == pgast.Token_ICONST || t == pgast.Token_FCONST
}

// isConstant says whether a token is a literal pg_stat_statements would
// have replaced: a number, a string (also E”, U&”, $$ $$), a bit string.
func isConstant(t pgast.Token) bool {
	switch t {
	case pgast.Token_ICONST, pgast.Token_FCONST, pgast.Token_SCONST, pgast.Token_USCONST,
		pgast.Token_BCONST, pgast.Token_XCONST:
		return true
	}
	return false
}

// Inline writes values into a statement's $n placeholders, each as given
// (SQL expressions such as '42'::integer) in parentheses: the statement as
// a simple-protocol client would send it, for sessions that cannot keep a
// prepared statement (behind a transaction-mode pool, where each
// transaction may get another server connection). The placeholders are
// found as tokens, so a "$1" inside a string or comment is left alone.
func Inline(query string, values []string) (string, error) {
	toks, err := pgast.Scan(query)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, t := range toks.Tokens {
		if t.Token != pgast.Token_PARAM {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(query[t.Start:t.End], "$"))
		if err != nil || n < 1 || n > len(values) {
			return "", fmt.Errorf("placeholder %s has no value", query[t.Start:t.End])
		}
		b.WriteString(query[last:t.Start])
		b.WriteString("(" + values[n-1] + ")")
		last = int(t.End)
	}
	b.WriteString(query[last:])
	return b.String(), nil
}
