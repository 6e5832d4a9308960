package logs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"
)

// Source is one log to read: a file, or "-" for standard input.
type Source struct {
	Name string
	// Path is set for a plain file, which may be read in byte ranges.
	Path string
	Open func() (io.ReadCloser, error)
}

// FileSource reads a file ("-" is stdin).
func FileSource(path string, stdin io.Reader) Source {
	if path == "-" {
		return Source{Name: "stdin", Open: func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }}
	}
	return Source{Name: path, Path: path, Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// Options says how to read logs.
type Options struct {
	// Prefix, when not empty, is the log_line_prefix of stderr and
	// syslog logs (otherwise it is detected).
	Prefix string
	// ShowLiterals keeps examples with their values (Summary.ShowLiterals).
	ShowLiterals bool
	// Format, when not empty, is the logs' format (otherwise detected).
	Format Format
}

// prefix is the log_line_prefix given, compiled (nil when none is).
func (o Options) prefix() (*Prefix, error) {
	if o.Prefix == "" {
		return nil, nil
	}
	return CompilePrefix(o.Prefix)
}

// FormatNames are the names --format-in takes, in the order help lists
// them.
func FormatNames() []string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return names
}

// FormatNamed is the format a name names, and whether there is one.
func FormatNamed(name string) (Format, bool) {
	for _, f := range Formats {
		if string(f) == name {
			return f, true
		}
	}
	return "", false
}

// Analyze reads the sources, one worker per file (as many at once as
// there are cores), and merges what they found. A file that cannot be read
// or parsed is reported in Files with its error and the others go on.
func Analyze(ctx context.Context, sources []Source, opt Options) (*Summary, error) {
	forced, err := opt.prefix()
	if err != nil {
		return nil, err
	}
	parts := make([]*Summary, len(sources))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	for i, src := range sources {
		g.Go(func() error {
			s := readSource(gctx, src, forced, opt.Format, opt.ShowLiterals)
			mu.Lock()
			parts[i] = s
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	total := NewSummary()
	total.ShowLiterals = opt.ShowLiterals
	for _, p := range parts {
		total.Merge(p)
	}
	total.Finish()
	return total, ctx.Err()
}

// readSource reads one log into its own summary.
func readSource(ctx context.Context, src Source, forced *Prefix, format Format, literals bool) *Summary {
	s := NewSummary()
	s.ShowLiterals = literals
	fs := FileStats{Name: src.Name}
	defer func() {
		fs.Partial = fs.Unrecognised*100 > fs.Lines
		s.Files = append(s.Files, fs)
	}()
	br, closer, err := openDetected(src, forced, format, &fs)
	if err != nil {
		fs.Error = err.Error()
		return s
	}
	defer closer.Close()
	if parts, ok := ranges(src.Path, fs.Format, fs.prefix, rangeWorkers()); ok {
		st, err := readRanges(ctx, src.Path, parts, fs.Format, fs.prefix, s)
		fs.Stats = st
		if err != nil {
			fs.Error = err.Error()
		}
		return s
	}
	st, err := Read(ctxReader{ctx, br}, fs.Format, fs.prefix, s.Add)
	fs.Stats = st
	if err != nil {
		fs.Error = err.Error()
	}
	return s
}

// Each reads one log in order, entry by entry, its format and prefix
// detected (or given in opt) as Analyze does; the file's statistics say
// what was read and what was not recognised.
func Each(ctx context.Context, src Source, opt Options, fn func(Entry)) (FileStats, error) {
	fs := FileStats{Name: src.Name}
	forced, err := opt.prefix()
	if err != nil {
		return fs, err
	}
	br, closer, err := openDetected(src, forced, opt.Format, &fs)
	if err != nil {
		return fs, fmt.Errorf("%s: %w", src.Name, err)
	}
	defer closer.Close()
	st, err := Read(ctxReader{ctx, br}, fs.Format, fs.prefix, fn)
	fs.Stats = st
	fs.Partial = fs.Unrecognised*100 > fs.Lines
	if err != nil {
		return fs, fmt.Errorf("%s: %w", src.Name, err)
	}
	return fs, nil
}

// openDetected opens a log and tells its format and prefix (the ones
// named win), recording them in fs.
func openDetected(src Source, forced *Prefix, format Format, fs *FileStats) (*bufio.Reader, io.Closer, error) {
	rc, err := src.Open()
	if err != nil {
		return nil, nil, err
	}
	r, err := Open(rc)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(256 << 10)
	f, p, err := Detect(head)
	if format != "" && format != f {
		// The format named wins; its prefix is the one given, or the one
		// detection finds for it.
		f, p, err = format, nil, nil
		if forced == nil && needsPrefix(format) {
			p, err = prefixFor(format, head)
		}
	}
	if forced != nil {
		switch {
		case needsPrefix(f) && f != Stderr:
			p, err = forced, nil
		case err != nil || f == Stderr:
			f, p, err = Stderr, forced, nil
		}
	}
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	fs.Format, fs.prefix = f, p
	if p != nil {
		fs.Prefix = p.Text
	}
	return br, rc, nil
}

// readRanges reads a file's byte ranges in parallel, each into its own
// summary, and merges them into s.
func readRanges(ctx context.Context, path string, parts [][2]int64, f Format, p *Prefix, s *Summary) (Stats, error) {
	sums := make([]*Summary, len(parts))
	stats := make([]Stats, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, r := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = NewSummary()
			sums[i].ShowLiterals = s.ShowLiterals
			rr, err := openRange(path, r[0], r[1], f, p)
			if err != nil {
				errs[i] = err
				return
			}
			defer rr.Close()
			stats[i], errs[i] = Read(ctxReader{ctx, rr}, f, p, sums[i].Add)
		}()
	}
	wg.Wait()
	var total Stats
	for i := range parts {
		s.Merge(sums[i])
		total.Entries += stats[i].Entries
		total.Lines += stats[i].Lines
		total.Unrecognised += stats[i].Unrecognised
		for _, ex := range stats[i].Examples {
			if len(total.Examples) < 5 {
				total.Examples = append(total.Examples, ex)
			}
		}
		if errs[i] != nil {
			return total, errs[i]
		}
	}
	return total, nil
}

// ctxReader stops a read when the context ends (Ctrl-C).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("interrupted: %w", err)
	}
	return c.r.Read(b)
}
