package model

// Profile is what perf sampled of some processes' CPU: each distinct
// stack with how many samples had it, and the statement the backend was
// running then (when it was a PostgreSQL backend that pg_stat_activity
// showed busy).
type Profile struct {
	// Target says what was profiled (pids, a command).
	Target  string
	Seconds float64
	// Samples is the number of samples taken; SampleMS the time one
	// stands for (cpu-clock's period).
	Samples  int64
	SampleMS float64
	Stacks   []ProfileStack
}

// ProfileStack is one call stack, leaf first, and its sample count.
type ProfileStack struct {
	Frames  []Frame
	Count   int64
	QueryID string // "" when not attributed
	Query   string
}

// Frame is one function in a stack: its symbol ("[unknown]" when the
// binary does not say) and the object it is in.
type Frame struct {
	Sym string
	DSO string
}
