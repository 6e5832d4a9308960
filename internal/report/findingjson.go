package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/pgmedic/pgmedic/internal/model"
)

// The plan report's findings, skipped rules and summary, written by hand
// as its nodes are: encoding/json builds an encoder for each type by
// reflection the first time it meets it, which for these few values was an
// eighth of what `explain --format json` of a small plan cost. The bytes are
// what json.MarshalIndent writes (TestPlanJSONMatchesEncoding fills every
// field and compares).

// object writes one JSON object at an indentation, as MarshalIndent
// does: "{", each member on its own line two spaces in, "}" back at ind.
type object struct {
	b   []byte
	ind int
	n   int
	err error
}

func (o *object) key(k string) {
	if o.n == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = append(o.b, '\n')
	o.b = append(o.b, spaces[:o.ind+2]...)
	o.b = appendJSONString(o.b, k)
	o.b = append(o.b, ": "...)
}

func (o *object) str(k, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	o.key(k)
	o.b = appendJSONString(o.b, v)
}

func (o *object) num(k string, v float64) {
	o.key(k)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if o.err == nil {
			o.err = fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(v, 'g', -1, 64))
		}
		v = 0
	}
	o.b = appendJSONFloat(o.b, v)
}

func (o *object) integer(k string, v int) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, int64(v), 10)
}

func (o *object) boolean(k string, v, omitEmpty bool) {
	if omitEmpty && !v {
		return
	}
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

// inner starts an object as the value of k.
func (o *object) inner(k string) *object {
	o.key(k)
	return &object{b: o.b, ind: o.ind + 2}
}

// close ends an inner object and takes its bytes back.
func (o *object) close(in *object) {
	o.b = in.end()
	if o.err == nil {
		o.err = in.err
	}
}

func (o *object) end() []byte {
	if o.n == 0 {
		return append(o.b, "{}"...)
	}
	o.b = append(o.b, '\n')
	o.b = append(o.b, spaces[:o.ind]...)
	return append(o.b, '}')
}

// appendArray writes a slice as MarshalIndent does: null when nil, []
// when empty, else one element a line.
func appendArray[T any](b []byte, ind int, v []T, elem func(b []byte, ind int, x *T) ([]byte, error)) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	if len(v) == 0 {
		return append(b, "[]"...), nil
	}
	b = append(b, '[')
	for i := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '\n')
		b = append(b, spaces[:ind+2]...)
		var err error
		if b, err = elem(b, ind+2, &v[i]); err != nil {
			return b, err
		}
	}
	b = append(b, '\n')
	b = append(b, spaces[:ind]...)
	return append(b, ']'), nil
}

func appendFindingJSON(b []byte, ind int, f *model.Finding) ([]byte, error) {
	o := &object{b: b, ind: ind}
	o.str("id", f.ID, true)
	o.str("rule", f.Rule, false)
	o.str("severity", f.Severity.String(), false)
	o.str("title", f.Title, false)
	obj := o.inner("object")
	obj.str("kind", f.Object.Kind, false)
	obj.str("name", f.Object.Name, false)
	obj.str("queryid", f.Object.QueryID, true)
	obj.str("fingerprint", f.Object.Fingerprint, true)
	obj.str("role", f.Object.Role, true)
	obj.str("database", f.Object.Database, true)
	o.close(obj)
	o.key("evidence")
	var err error
	o.b, err = appendArray(o.b, ind+2, f.Evidence, func(b []byte, ind int, e *model.Evidence) ([]byte, error) {
		eo := &object{b: b, ind: ind}
		eo.str("label", e.Label, false)
		eo.num("value", e.Value)
		eo.str("unit", e.Unit, true)
		eo.boolean("fact", e.Fact, true)
		return eo.end(), eo.err
	})
	if err != nil {
		return o.b, err
	}
	im := o.inner("impact")
	im.str("summary", f.Impact.Summary, false)
	im.num("share", f.Impact.Share)
	o.close(im)
	fx := o.inner("fix")
	fx.str("summary", f.Fix.Summary, false)
	fx.str("sql", f.Fix.SQL, true)
	o.close(fx)
	v := &f.Verification
	vo := o.inner("verification")
	vo.str("status", v.Status, false)
	vo.str("method", v.Method, true)
	vo.str("reason", v.Reason, true)
	for _, m := range []struct {
		k string
		m *model.Measure
	}{{"before", v.Before}, {"after", v.After}} {
		if m.m == nil {
			continue
		}
		mo := vo.inner(m.k)
		mo.num("value", m.m.Value)
		mo.str("unit", m.m.Unit, false)
		mo.boolean("higher_is_better", m.m.HigherIsBetter, true)
		vo.close(mo)
	}
	if len(v.Parameters) > 0 {
		vo.key("parameters")
		vo.b, _ = appendArray(vo.b, ind+4, v.Parameters, func(b []byte, _ int, s *string) ([]byte, error) {
			return appendJSONString(b, *s), nil
		})
	}
	vo.str("where", v.Where, true)
	o.close(vo)
	o.str("docs", f.Docs, false)
	return o.end(), o.err
}

func appendSkipJSON(b []byte, ind int, s *model.Skip) ([]byte, error) {
	o := &object{b: b, ind: ind}
	o.str("rule", s.Rule, false)
	o.str("reason", s.Reason, false)
	o.str("fix", s.Fix, true)
	return o.end(), nil
}

func appendSummaryJSON(b []byte, ind int, s *Summary) []byte {
	o := &object{b: b, ind: ind}
	for _, f := range []struct {
		k string
		v int
	}{{"critical", s.Critical}, {"warning", s.Warning}, {"info", s.Info}, {"confirmed", s.Confirmed}, {"refuted", s.Refuted},
		{"estimated", s.Estimated}, {"not_run", s.NotRun}, {"rules_run", s.RulesRun}, {"rules_with_findings", s.RulesActive}} {
		o.integer(f.k, f.v)
	}
	return o.end()
}
