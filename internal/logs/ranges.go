package logs

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"runtime"
	"strings"
)

// splitMin is the smallest file read by several workers: below it the
// split costs more than it saves.
var splitMin int64 = 16 << 20

// ranges cuts a plain file into n byte ranges for parallel reading, when
// its format allows it: stderr and jsonlog entries start on a line of
// their own that can be recognised (a prefix that is not a DETAIL,
// STATEMENT, ... line; a JSON object), so each worker starts at the first
// entry at or after its offset and stops at the first entry at or after
// the next one's (the formats whose row says split). csvlog (quoted
// fields span lines), syslog (a message's pieces interleave with other
// processes'), the formats that carry stderr lines inside another
// envelope, and compressed input are read whole.
func ranges(path string, f Format, p *Prefix, n int) ([][2]int64, bool) {
	if n < 2 || !rowOf(f).split || path == "" {
		return nil, false
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < splitMin {
		return nil, false
	}
	if fh, err := os.Open(path); err == nil {
		var magic [2]byte
		_, rerr := io.ReadFull(fh, magic[:])
		fh.Close()
		if rerr != nil || (magic[0] == 0x1f && magic[1] == 0x8b) {
			return nil, false
		}
	}
	size := fi.Size()
	var out [][2]int64
	for i := 0; i < n; i++ {
		out = append(out, [2]int64{size * int64(i) / int64(n), size * int64(i+1) / int64(n)})
	}
	return out, true
}

// isStart says whether a line starts an entry (and not a line attached to
// the entry before it).
func isStart(line string, f Format, p *Prefix) bool {
	if f == JSON {
		return strings.HasPrefix(line, "{")
	}
	e, ok := p.parse(line)
	return ok && !detailLevels()[e.Level]
}

// rangeReader yields the lines of [start, end) of a file, moved to entry
// boundaries: from the first entry that starts at or after start, to the
// last line before the first entry that starts at or after end.
type rangeReader struct {
	r    *bufio.Reader
	f    Format
	p    *Prefix
	pos  int64
	end  int64
	buf  bytes.Buffer
	done bool
	// midLine: the bytes passed through so far end inside a line, whose
	// rest belongs to this range whatever it looks like.
	midLine bool
	closer  io.Closer
}

func openRange(path string, start, end int64, f Format, p *Prefix) (*rangeReader, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := fh.Seek(start, io.SeekStart); err != nil {
		fh.Close()
		return nil, err
	}
	rr := &rangeReader{r: bufio.NewReaderSize(fh, 1<<20), f: f, p: p, pos: start, end: end, closer: fh}
	if start > 0 {
		// The first line may be cut: skip it, then up to the first entry.
		line, err := rr.r.ReadString('\n')
		rr.pos += int64(len(line))
		for err == nil {
			line, err = rr.r.ReadString('\n')
			if line == "" {
				break
			}
			if isStart(strings.TrimSuffix(line, "\n"), f, p) {
				rr.buf.WriteString(line)
				rr.pos += int64(len(line))
				if rr.pos-int64(len(line)) >= end {
					rr.done, rr.buf = true, bytes.Buffer{}
				}
				break
			}
			rr.pos += int64(len(line))
		}
		if err != nil {
			rr.done = rr.buf.Len() == 0
		}
	}
	return rr, nil
}

func (rr *rangeReader) Read(b []byte) (int, error) {
	// Before the range's end the bytes pass through as they are: only the
	// lines from the end on are looked at, to stop at the next entry.
	if room := rr.end - rr.pos; rr.buf.Len() == 0 && !rr.done && room > 0 {
		if int64(len(b)) > room {
			b = b[:room]
		}
		n, err := rr.r.Read(b)
		rr.pos += int64(n)
		if n > 0 {
			rr.midLine = b[n-1] != '\n'
		}
		if err == io.EOF {
			rr.done = true
			if n > 0 {
				err = nil
			}
		}
		return n, err
	}
	for rr.buf.Len() == 0 {
		if rr.done {
			return 0, io.EOF
		}
		line, err := rr.r.ReadString('\n')
		if line != "" {
			if !rr.midLine && rr.pos >= rr.end && isStart(strings.TrimSuffix(line, "\n"), rr.f, rr.p) {
				rr.done = true
				break
			}
			rr.midLine = false
			rr.pos += int64(len(line))
			rr.buf.WriteString(line)
		}
		if err == io.EOF {
			rr.done = true
		} else if err != nil {
			return 0, err
		}
	}
	if rr.buf.Len() == 0 {
		return 0, io.EOF
	}
	return rr.buf.Read(b)
}

func (rr *rangeReader) Close() error { return rr.closer.Close() }

// rangeWorkers is how many byte ranges a large file is cut into.
var rangeWorkers = func() int { return runtime.GOMAXPROCS(0) }
