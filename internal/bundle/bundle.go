// Package bundle is the incident bundle pgmedic watch writes and check
// --from reads: a directory with what the incident was (incident.json),
// the snapshot the rules judge (snapshot.json: the sessions sampled over
// the window, the statements that ran in it, the database's catalogs and
// settings read when it closed) and the ring's records of the window as
// they were written (window.jsonl).
package bundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Files of a bundle.
const (
	MetaFile     = "incident.json"
	SnapshotFile = "snapshot.json"
	WindowFile   = "window.jsonl"
)

// Meta is incident.json.
type Meta struct {
	PGMedic string            `json:"pgmedic"`
	Target  string            `json:"target"` // the watch target's name
	Labels  map[string]string `json:"labels,omitempty"`
	Server  model.Target      `json:"server"`
	// Database is the database the snapshot was read from: the one whose
	// sessions the incident involved most.
	Database string `json:"database"`
	model.IncidentWindow
	// Triggers say what fired, first of each kind, as "kind: detail".
	Triggers []string `json:"triggers"`
	// Ticks and Statements count what the window holds; Gaps say when
	// watch was not connected; Notes say what the bundle lacks.
	Ticks      int      `json:"ticks"`
	Statements int      `json:"statements"`
	Gaps       []string `json:"gaps,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	// ServerCores is what the rules judged "more sessions than cores"
	// against, and CoresGuessed says it is a guess.
	ServerCores  int  `json:"server_cores"`
	CoresGuessed bool `json:"cores_guessed,omitempty"`
}

// Write writes a bundle into dir atomically: into a temporary directory
// beside it, renamed when whole, so a reader never sees half a bundle. The
// window's records are written by window.
func Write(dir string, meta Meta, snap *model.Snapshot, window func(path string) error) error {
	tmp := filepath.Join(filepath.Dir(dir), ".tmp-"+filepath.Base(dir))
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("creating the bundle: %w", err)
	}
	for name, v := range map[string]any{MetaFile: meta, SnapshotFile: snap} {
		b, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			return fmt.Errorf("encoding the bundle's %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name), append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("writing the bundle: %w", err)
		}
	}
	if window != nil {
		if err := window(filepath.Join(tmp, WindowFile)); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("finishing the bundle: %w", err)
	}
	return nil
}

// Read reads a bundle's incident and snapshot. Statements come back
// unparsed (collect.Reparse parses them).
func Read(dir string) (*Meta, *model.Snapshot, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("--from %s: no such bundle (pgmedic watch writes them under --dir, in incidents/)", dir)
	case err != nil:
		return nil, nil, fmt.Errorf("--from %s: %w", dir, err)
	case !fi.IsDir():
		return nil, nil, fmt.Errorf("--from %s is a file: give the bundle's directory (the one holding %s)", dir, MetaFile)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.jsonl")); len(segs) > 0 {
		return nil, nil, fmt.Errorf("--from %s is watch's ring (the minutes it recorded), not an incident bundle: give a directory under %s",
			dir, filepath.Join(filepath.Dir(filepath.Clean(dir)), "incidents"))
	}
	if incs, _ := filepath.Glob(filepath.Join(dir, "incidents", "*", MetaFile)); len(incs) > 0 {
		return nil, nil, fmt.Errorf("--from %s is watch's directory: give one of the bundles under its incidents/, such as the latest, %s", dir, filepath.Dir(incs[len(incs)-1]))
	}
	var meta Meta
	if err := readJSON(filepath.Join(dir, MetaFile), &meta); err != nil {
		return nil, nil, err
	}
	var snap model.Snapshot
	if err := readJSON(filepath.Join(dir, SnapshotFile), &snap); err != nil {
		return nil, nil, err
	}
	if meta.To.Before(meta.From) || snap.Database == "" {
		return nil, nil, fmt.Errorf("--from %s: %s or %s is not a watch bundle's", dir, MetaFile, SnapshotFile)
	}
	return &meta, &snap, nil
}

// ReadWindow reads the ticks of a bundle's window (window.jsonl): the
// sessions and pools sampled at each, and the gaps where watch was not
// connected. Lines that do not parse are counted in bad (ParseWindow).
func ReadWindow(dir string) (samples []model.ActivitySample, pools []model.PoolSample, gaps []model.Span, bad int, err error) {
	f, err := os.Open(filepath.Join(dir, WindowFile))
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("--from: reading the incident's window: %w", err)
	}
	defer f.Close()
	samples, pools, gaps, bad, err = ParseWindow(f)
	if err != nil {
		return nil, nil, nil, bad, fmt.Errorf("--from: reading the incident's window: %w", err)
	}
	return samples, pools, gaps, bad, nil
}

// ParseWindow reads watch's ring records, one JSON object a line: the
// ticks' sessions and pools (each dated by its record when it carries no
// time of its own) and the gaps. A line that does not parse, or is not an
// object (a crash or a full disk cut it), is counted in bad and skipped;
// only a line longer than 256 MB is an error.
func ParseWindow(r io.Reader) (samples []model.ActivitySample, pools []model.PoolSample, gaps []model.Span, bad int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// The fields of watch's ring records a timeline needs.
		var rec struct {
			Kind   string                `json:"kind"`
			At     time.Time             `json:"at"`
			Sample *model.ActivitySample `json:"sample"`
			Pools  *model.PoolSample     `json:"pools"`
			Until  time.Time             `json:"until"`
			Note   string                `json:"note"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			bad++
			continue
		}
		switch rec.Kind {
		case "tick":
			if rec.Sample != nil {
				s := *rec.Sample
				if s.At.IsZero() {
					s.At = rec.At
				}
				samples = append(samples, s)
			}
			if rec.Pools != nil {
				p := *rec.Pools
				if p.At.IsZero() {
					p.At = rec.At
				}
				pools = append(pools, p)
			}
		case "gap":
			gaps = append(gaps, model.Span{From: rec.At, To: rec.Until, Note: rec.Note})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, nil, bad, err
	}
	// The ring is written in time order; a window put together by hand
	// may not be.
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	return samples, pools, gaps, bad, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--from: %s is missing: is %s a bundle written by pgmedic watch?", filepath.Base(path), filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("--from: %s is damaged (%v); a bundle is written whole or not at all, so it was changed after", path, err)
	}
	return nil
}
