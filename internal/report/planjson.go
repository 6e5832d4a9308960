package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/pgmedic/pgmedic/internal/plan"
)

// The plan report's JSON is written as it is built, node by node: a plan
// of thousands of nodes is most of explain's output, and encoding it by
// reflection (then indenting it in a second pass) cost more than parsing
// the plan. The bytes are those encoding/json writes with two-space
// indentation (TestPlanJSONMatchesEncoding holds them to it); the findings,
// skipped rules and summary are written by hand too (findingjson.go).

// writePlanJSON writes r as JSON.
func writePlanJSON(w io.Writer, r *PlanReport) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	b := make([]byte, 0, 4096)
	b = append(b, "{\n  \"pgmedic\": "...)
	b = appendJSONString(b, r.PGMedic)
	b = append(b, ",\n  \"source\": "...)
	b = appendJSONString(b, r.Source)
	b = append(b, ",\n  \"plan\": {"...)
	p := r.Plan
	b = append(b, "\n    \"input_format\": "...)
	b = appendJSONString(b, p.InputFormat)
	b = appendField(b, 4, "analyze", strconv.AppendBool(nil, p.Analyze))
	b = appendField(b, 4, "timing", strconv.AppendBool(nil, p.Timing))
	b = appendField(b, 4, "buffers", strconv.AppendBool(nil, p.Buffers))
	var err error
	for _, f := range []struct {
		name string
		v    float64
	}{{"planning_ms", p.PlanningMS}, {"execution_ms", p.ExecutionMS}, {"jit_ms", p.JITMS}} {
		if b, err = appendFloatField(b, 4, f.name, f.v); err != nil {
			return err
		}
	}
	b = appendSettings(b, p.Settings)
	b = append(b, ",\n    \"nodes\": "...)
	if p.Nodes == nil {
		b = append(b, "null"...)
	} else if len(p.Nodes) == 0 {
		b = append(b, "[]"...)
	} else {
		b = append(b, '[')
		for i := range p.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendNode(b, &p.Nodes[i]); err != nil {
				return err
			}
			if len(b) > 32<<10 {
				if _, err := bw.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		b = append(b, "\n    ]"...)
	}
	b = append(b, "\n  }"...)
	b = append(b, ",\n  \"findings\": "...)
	if b, err = appendArray(b, 2, r.Findings, appendFindingJSON); err != nil {
		return err
	}
	b = append(b, ",\n  \"skipped\": "...)
	if b, err = appendArray(b, 2, r.Skipped, appendSkipJSON); err != nil {
		return err
	}
	b = append(b, ",\n  \"summary\": "...)
	b = appendSummaryJSON(b, 2, &r.Summary)
	b = append(b, "\n}\n"...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

// appendSettings writes the plan's non-default settings, by name, when it
// has any.
func appendSettings(b []byte, settings map[string]string) []byte {
	if len(settings) == 0 {
		return b
	}
	b = append(b, ",\n    \"settings\": {"...)
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n      "...)
		b = appendJSONString(b, k)
		b = append(b, ": "...)
		b = appendJSONString(b, settings[k])
	}
	return append(b, "\n    }"...)
}

// appendNode writes one node at the depth of plan.nodes' elements.
func appendNode(b []byte, n *plan.FlatNode) ([]byte, error) {
	const in = 8
	b = append(b, "\n      {\n        \"id\": "...)
	b = strconv.AppendInt(b, int64(n.ID), 10)
	b = appendField(b, in, "parent", strconv.AppendInt(nil, int64(n.Parent), 10))
	b = appendField(b, in, "depth", strconv.AppendInt(nil, int64(n.Depth), 10))
	b = appendStringField(b, in, "label", n.Label, false)
	b = appendStringField(b, in, "relationship", n.Relation, true)
	b = appendField(b, in, "hot", strconv.AppendBool(nil, n.Hot))
	var err error
	for _, f := range []struct {
		name      string
		v         float64
		omitEmpty bool
	}{
		{"total_cost", n.Cost, false}, {"plan_rows", n.PlanRows, false}, {"actual_rows", n.ActualRows, false}, {"loops", n.Loops, false},
		{"inclusive_ms", n.InclusiveMS, false}, {"exclusive_ms", n.ExclusiveMS, false}, {"share", n.Share, false},
		{"misestimate", n.Misestimate, true},
	} {
		if f.omitEmpty && f.v == 0 {
			continue
		}
		if b, err = appendFloatField(b, in, f.name, f.v); err != nil {
			return b, err
		}
	}
	b = appendStringField(b, in, "estimate", n.Direction, true)
	for _, f := range []struct {
		name string
		v    float64
	}{{"rows_removed", n.Removed}, {"heap_fetches", n.HeapFetches}} {
		if f.v != 0 {
			if b, err = appendFloatField(b, in, f.name, f.v); err != nil {
				return b, err
			}
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"shared_hit", n.SharedHit}, {"shared_read", n.SharedRead}, {"temp_blocks", n.TempBlocks}} {
		if f.v != 0 {
			b = appendField(b, in, f.name, strconv.AppendInt(nil, f.v, 10))
		}
	}
	if n.IOms != 0 {
		if b, err = appendFloatField(b, in, "io_ms", n.IOms); err != nil {
			return b, err
		}
	}
	b = appendStringField(b, in, "spill", n.Spill, true)
	if n.Never {
		b = appendField(b, in, "never_executed", []byte("true"))
	}
	b = appendStringField(b, in, "detail", n.Detail, true)
	return append(b, "\n      }"...), nil
}

const spaces = "                "

// appendField writes ",\n", the indentation, the key and the value.
func appendField(b []byte, indent int, key string, value []byte) []byte {
	b = append(b, ",\n"...)
	b = append(b, spaces[:indent]...)
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, "\": "...)
	return append(b, value...)
}

func appendStringField(b []byte, indent int, key, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	b = appendField(b, indent, key, nil)
	return appendJSONString(b, v)
}

func appendFloatField(b []byte, indent int, key string, v float64) ([]byte, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return b, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(v, 'g', -1, 64))
	}
	b = appendField(b, indent, key, nil)
	return appendJSONFloat(b, v), nil
}

// appendJSONFloat writes a float64 as encoding/json does: plain decimals
// from 1e-6 to 1e21, exponent form outside, without a leading zero in a
// negative exponent.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s quoted as encoding/json does with HTML
// escaping on (its default): <, > and & as \u003c, \u003e and \u0026,
// U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
