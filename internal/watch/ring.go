package watch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Record is one line of the ring: a tick of the sampler, a reading of
// pg_stat_statements, or a note (start, a gap while disconnected).
type Record struct {
	Kind string    `json:"kind"` // tick, statements, start, gap
	At   time.Time `json:"at"`
	// A tick: the sessions, pg_stat_database's counters by database
	// (cumulative, as the server keeps them), PgBouncer's pools, and how
	// long the tick's queries took.
	Sample    *model.ActivitySample          `json:"sample,omitempty"`
	Databases map[string]model.DatabaseDelta `json:"databases,omitempty"`
	Pools     *model.PoolSample              `json:"pools,omitempty"`
	TickMS    float64                        `json:"tick_ms,omitempty"`
	// Hidden counts the sessions of the watched database whose state and
	// statement the role may not see (without pg_read_all_stats).
	Hidden int `json:"hidden,omitempty"`
	// Own is what watch itself had added to the counters by this tick.
	Own *OwnWork `json:"own,omitempty"`
	// A reading of pg_stat_statements: what moved since Since.
	Since      time.Time   `json:"since,omitzero"`
	Statements []Statement `json:"statements,omitempty"`
	// A start: the server; a gap: why nothing was sampled from At to
	// Until.
	Server *Server   `json:"server,omitempty"`
	Until  time.Time `json:"until,omitzero"`
	Note   string    `json:"note,omitempty"`
}

// Server is what a start record says of the server.
type Server struct {
	Version    string `json:"version"`
	VersionNum int    `json:"version_num"`
	Database   string `json:"database"`
	Cores      int    `json:"cores"`
	// CoresGuessed: a remote server and no --server-cores.
	CoresGuessed bool `json:"cores_guessed,omitempty"`
}

// Statement is one pg_stat_statements entry's change between two
// readings, with the database it ran in. SumSqMS is the change of the sum
// of squared execution times, from which the interval's spread (and a p95
// estimate) follows.
type Statement struct {
	Database string `json:"database"`
	model.Statement
	SumSqMS float64 `json:"sumsq_ms,omitempty"`
}

// Ring is the flight recorder's bounded store on disk: one file of JSON
// lines per minute, the oldest removed past Keep or MaxBytes. A record is
// written with one write call as soon as it is made, so a kill -9 loses
// at most the record being made; a line cut by a full disk is skipped
// when read.
type Ring struct {
	Dir      string
	Keep     time.Duration
	MaxBytes int64

	file    *os.File
	segment string
}

// segmentName is the file a record at t goes to.
func segmentName(t time.Time) string {
	return "seg-" + t.UTC().Format("20060102T1504Z") + ".jsonl"
}

// segmentTime is when a segment's minute began.
func segmentTime(name string) (time.Time, bool) {
	s, ok := strings.CutPrefix(name, "seg-")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse("20060102T1504Z", strings.TrimSuffix(s, ".jsonl"))
	return t, err == nil
}

// Append writes a record to its minute's segment, opening the next one
// (and pruning) when the minute changes.
func (r *Ring) Append(rec Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding a ring record: %w", err)
	}
	line = append(line, '\n')
	name := segmentName(rec.At)
	if r.file == nil || name != r.segment {
		if r.file != nil {
			// The finished minute goes to the disk before the next
			// begins: a power cut loses at most the current minute.
			r.file.Sync()
			r.file.Close()
		}
		if err := os.MkdirAll(r.Dir, 0o700); err != nil {
			return fmt.Errorf("creating the ring directory: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(r.Dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("opening the ring's segment: %w", err)
		}
		r.file, r.segment = f, name
		r.prune(rec.At)
	}
	if _, err := r.file.Write(line); err != nil {
		return fmt.Errorf("writing the ring (%s): %w", r.Dir, err)
	}
	return nil
}

// Close ends the current segment on disk.
func (r *Ring) Close() error {
	if r.file == nil {
		return nil
	}
	r.file.Sync()
	err := r.file.Close()
	r.file = nil
	return err
}

// segments lists the ring's files, oldest first.
func (r *Ring) segments() []string {
	entries, _ := os.ReadDir(r.Dir)
	var out []string
	for _, e := range entries {
		if _, ok := segmentTime(e.Name()); ok && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// prune removes segments older than Keep, then the oldest while the ring
// holds more than MaxBytes; the segment being written stays.
func (r *Ring) prune(now time.Time) {
	segs := r.segments()
	var sizes []int64
	var total int64
	for _, s := range segs {
		var n int64
		if fi, err := os.Stat(filepath.Join(r.Dir, s)); err == nil {
			n = fi.Size()
		}
		sizes = append(sizes, n)
		total += n
	}
	for i, s := range segs {
		if s == r.segment {
			break
		}
		t, _ := segmentTime(s)
		old := r.Keep > 0 && t.Add(time.Minute).Before(now.Add(-r.Keep))
		big := r.MaxBytes > 0 && total > r.MaxBytes
		if !old && !big {
			break
		}
		if os.Remove(filepath.Join(r.Dir, s)) == nil {
			total -= sizes[i]
		}
	}
}

// Read returns the records from..to (inclusive), in order. Lines that do
// not parse (the last one of a segment cut by a crash) are counted in
// skipped.
func (r *Ring) Read(from, to time.Time) (recs []Record, skipped int, err error) {
	if r.file != nil {
		r.file.Sync()
	}
	for _, s := range r.segments() {
		t, _ := segmentTime(s)
		if t.Add(time.Minute).Before(from) || t.After(to) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.Dir, s))
		if err != nil {
			return nil, skipped, fmt.Errorf("reading the ring: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			var rec Record
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				skipped++
				continue
			}
			if !rec.At.Before(from) && !rec.At.After(to) {
				recs = append(recs, rec)
			}
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].At.Before(recs[j].At) })
	return recs, skipped, nil
}
