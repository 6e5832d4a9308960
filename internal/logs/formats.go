package logs

import (
	"fmt"
	"io"
	"strings"
)

// formatRow is one row of the log formats table: what pgmedic needs to
// know of a format besides telling the plain-text formats apart (Detect,
// which reads a log's first lines).
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

	// The formats that write one JSON object a line. is says a line is
	// of this format: a line is the first such row's whose is holds, so
	// a format whose lines have nothing of their own (CloudWatch's: a
	// message and a time) comes after the others. Then either entry
	// reads a line that took PostgreSQL's line apart into fields (as
	// jsonlog does), or text is the stderr line a carrier holds, with
	// what the carrier says of it (its time, its process); init gives
	// such a row its read and texts.
	is    func(*jsonLine) bool
	entry func(*jsonLine) (Entry, lineKind)
	text  func(*jsonLine) (syslogLine, lineKind)
}

// formats is every log format pgmedic reads, in the order --format-in
// lists them: the one table a format is added to (its row, its reader or
// its JSON line's functions, a golden log under testdata; a plain-text
// format also its recognition in Detect). It is set in init, since the
// readers of its rows look rows up in it.
var formats []formatRow

func init() {
	formats = []formatRow{
		{Format: Stderr, Says: "stderr with any log_line_prefix", texts: asIs, read: readPrefixed(readStderr), split: true},
		{Format: CSV, Says: "csvlog of every version", read: readWhole(readCSV)},
		{Format: JSON, Says: "jsonlog (15+)", split: true, is: isJSONLog, entry: jsonLogEntry},
		{Format: Syslog, Says: "syslog files", texts: func(_ Format, first []string) []string { t, _ := syslogTexts(first); return t }, read: readPrefixed(readSyslog)},
		{Format: Logplex, Says: "Heroku logplex", texts: func(_ Format, first []string) []string { t, _ := logplexTexts(first); return t }, read: readPrefixed(readLogplex)},
		{Format: CNPG, Says: "CloudNativePG's JSON", is: isCNPG, entry: cnpgEntry},
		{Format: CloudSQL, Says: "Google Cloud SQL's Cloud Logging JSON", is: isCloudSQL, text: cloudSQLText},
		{Format: Journald, Says: "journald's JSON (journalctl -o json)", is: isJournald, text: journaldText},
		{Format: Azure, Says: "Azure Monitor's export", is: isAzure, entry: azureEntry},
		{Format: Docker, Says: "Docker's json-file driver (a container's log file)", is: isDocker, text: dockerText},
		{Format: CloudWatch, Says: "Amazon RDS and Aurora CloudWatch exports", is: isCloudWatch, text: cloudWatchText},
		{Format: PgBouncer, Says: "PgBouncer's own log", read: readWhole(readBouncer)},
	}
	Formats = make([]Format, len(formats))
	for i := range formats {
		r := &formats[i]
		Formats[i] = r.Format
		// A JSON format's reader follows from its row: the lines read
		// one by one, each by its own format's row (a file can mix an
		// operator's lines with the server's); a carrier's stderr lines
		// also give its prefix.
		switch {
		case r.entry != nil:
			r.read = readWhole(readJSON)
		case r.text != nil:
			r.read, r.texts = readCarriedFormat, carriedTexts
		}
	}
}

// Formats are the formats --format-in names, in the table's order.
var Formats []Format

// jsonFormats are the names of the formats that write a JSON object a
// line.
func jsonFormats() []string {
	var out []string
	for _, r := range formats {
		if r.is != nil {
			out = append(out, string(r.Format))
		}
	}
	return out
}

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
