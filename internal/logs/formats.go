package logs

import (
	"fmt"
	"io"
	"strings"
)

// formatRow is one row of the log formats table: what pgmedic needs to
// know of a format besides recognising it (Detect, which reads a log's
// first lines and tells the formats apart, and classifyJSON for the
// formats that write one JSON object a line).
type formatRow struct {
	Format Format
	// Says what writes it, for the help.
	Says string
	// texts are, of a log's first lines, the PostgreSQL stderr lines it
	// carries, on which the log_line_prefix is detected; nil for a format
	// that carries no prefix (csvlog, jsonlog, PgBouncer's own).
	texts func(f Format, first []string) []string
	// read reads a whole log of this format (p is its prefix, nil for a
	// format without one).
	read func(r io.Reader, f Format, p *Prefix, fn func(Entry)) (Stats, error)
	// split: an entry can be recognised from any offset of a plain file
	// (a prefixed line that is not a DETAIL; a JSON object), so a large
	// file is read in parallel ranges (see ranges).
	split bool
}

// formats is every log format pgmedic reads, in the order --format-in
// lists them: the one table a format is added to (its row, its reader,
// its detection in Detect, a golden log under testdata).
var formats = []formatRow{
	{Stderr, "stderr with any log_line_prefix", asIs, readPrefixed(readStderr), true},
	{CSV, "csvlog of every version", nil, readWhole(readCSV), false},
	{JSON, "jsonlog (15+)", nil, readWhole(readJSON), true},
	{Syslog, "syslog files", func(_ Format, first []string) []string { t, _ := syslogTexts(first); return t }, readPrefixed(readSyslog), false},
	{Logplex, "Heroku logplex", func(_ Format, first []string) []string { t, _ := logplexTexts(first); return t }, readPrefixed(readLogplex), false},
	{CloudSQL, "Google Cloud SQL's Cloud Logging JSON", carriedTexts, readCarriedFormat, false},
	{CloudWatch, "Amazon RDS and Aurora CloudWatch exports", carriedTexts, readCarriedFormat, false},
	{Journald, "journald's JSON (journalctl -o json)", carriedTexts, readCarriedFormat, false},
	{Docker, "Docker's json-file driver (a container's log file)", carriedTexts, readCarriedFormat, false},
	{CNPG, "CloudNativePG's JSON", nil, readWhole(readJSON), false},
	{Azure, "Azure Monitor's export", nil, readWhole(readJSON), false},
	{PgBouncer, "PgBouncer's own log", nil, readWhole(readBouncer), false},
}

// Formats are the formats --format-in names.
var Formats = func() []Format {
	out := make([]Format, len(formats))
	for i, r := range formats {
		out[i] = r.Format
	}
	return out
}()

// rowOf is a format's row (the zero row for a format not in the table).
func rowOf(f Format) formatRow {
	for _, r := range formats {
		if r.Format == f {
			return r
		}
	}
	return formatRow{}
}

func asIs(_ Format, first []string) []string { return first }

func readWhole(read func(io.Reader, func(Entry)) (Stats, error)) func(io.Reader, Format, *Prefix, func(Entry)) (Stats, error) {
	return func(r io.Reader, _ Format, _ *Prefix, fn func(Entry)) (Stats, error) { return read(r, fn) }
}

func readPrefixed(read func(io.Reader, *Prefix, func(Entry)) (Stats, error)) func(io.Reader, Format, *Prefix, func(Entry)) (Stats, error) {
	return func(r io.Reader, _ Format, p *Prefix, fn func(Entry)) (Stats, error) { return read(r, p, fn) }
}

func readCarriedFormat(r io.Reader, f Format, p *Prefix, fn func(Entry)) (Stats, error) {
	return readCarried(r, p, fn, unwrapJSON(f))
}

// FormatHelp lists the formats, one a line with what writes it, for the
// help of the commands that read logs.
func FormatHelp() string {
	var b strings.Builder
	for i, r := range formats {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  %-16s %s", r.Format, r.Says)
	}
	return b.String()
}
