package profile

import (
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Statement is what a backend was running when it was sampled.
type Statement struct {
	QueryID string
	Query   string
}

// Builder gathers samples into a profile: identical stacks of the same
// statement become one entry with a count.
type Builder struct {
	p      model.Profile
	index  map[string]int
	period int64
	// Attribute, when set, names the statement a sample's process was
	// running at the sample's time.
	Attribute func(s Sample) (Statement, bool)
}

// NewBuilder starts an empty profile of target.
func NewBuilder(target string) *Builder {
	return &Builder{p: model.Profile{Target: target}, index: map[string]int{}}
}

// Add counts one sample.
func (b *Builder) Add(s Sample) {
	b.p.Samples++
	if s.Period > 0 {
		b.period = s.Period
	}
	var st Statement
	if b.Attribute != nil {
		st, _ = b.Attribute(s)
	}
	var key strings.Builder
	key.WriteString(st.QueryID)
	for _, f := range s.Stack {
		key.WriteByte(0)
		key.WriteString(f.Sym)
		key.WriteByte(1)
		key.WriteString(f.DSO)
	}
	k := key.String()
	if i, ok := b.index[k]; ok {
		b.p.Stacks[i].Count++
		return
	}
	b.index[k] = len(b.p.Stacks)
	b.p.Stacks = append(b.p.Stacks, model.ProfileStack{Frames: s.Stack, Count: 1, QueryID: st.QueryID, Query: st.Query})
}

// Profile is what was gathered, the most frequent stacks first.
func (b *Builder) Profile(seconds float64) model.Profile {
	p := b.p
	p.Seconds = seconds
	if b.period > 0 {
		p.SampleMS = float64(b.period) / 1e6 // cpu-clock counts nanoseconds
	}
	sort.SliceStable(p.Stacks, func(i, j int) bool { return p.Stacks[i].Count > p.Stacks[j].Count })
	return p
}

// Folded is the profile as folded stacks ("root;...;leaf count"), the
// statement's label as the root frame when the sample was attributed.
func Folded(p model.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Stacks {
		out[foldedKey(s)] += s.Count
	}
	return out
}

func foldedKey(s model.ProfileStack) string {
	names := make([]string, 0, len(s.Frames)+1)
	if s.QueryID != "" {
		names = append(names, statementFrame(s))
	}
	for i := len(s.Frames) - 1; i >= 0; i-- {
		names = append(names, strings.ReplaceAll(FrameName(s.Frames[i]), ";", ":"))
	}
	return strings.Join(names, ";")
}

// statementFrame is the root frame that names a sample's statement.
func statementFrame(s model.ProfileStack) string {
	q := strings.Join(strings.Fields(s.Query), " ")
	if len(q) > 80 {
		q = q[:80] + "..."
	}
	return strings.ReplaceAll("statement "+s.QueryID+": "+q, ";", ":")
}

// node is one frame of the flame graph's tree.
type node struct {
	name  string
	count int64
	kids  []*node
	byKey map[string]*node
}

// tree builds the flame graph's tree from the folded stacks.
func tree(folded map[string]int64) *node {
	root := &node{name: "all", byKey: map[string]*node{}}
	keys := make([]string, 0, len(folded))
	for k := range folded {
		keys = append(keys, k)
	}
	sort.Strings(keys) // children in name order: the same graph every time
	for _, k := range keys {
		n := folded[k]
		root.count += n
		cur := root
		for _, name := range strings.Split(k, ";") {
			next := cur.byKey[name]
			if next == nil {
				next = &node{name: name, byKey: map[string]*node{}}
				cur.byKey[name] = next
				cur.kids = append(cur.kids, next)
			}
			next.count += n
			cur = next
		}
	}
	return root
}
