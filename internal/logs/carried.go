package logs

import (
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Where PostgreSQL runs as a service, its log reaches the user inside
// someone else's format: a JSON object per line from a cloud's logging
// service or a Kubernetes operator, a syslog-like line from Heroku's
// logplex. Some of these carry PostgreSQL's own stderr line (with the
// service's log_line_prefix) as a text field; others have taken the line
// apart into fields, as csvlog and jsonlog do.

// The carrier formats pgmedic reads, named as the report says them.
const (
	// CloudSQL is Google Cloud Logging's export of a Cloud SQL instance's
	// log: the line in textPayload, its time in timestamp.
	CloudSQL Format = "cloudsql-json"
	// CloudWatch is Amazon CloudWatch Logs' export of an RDS or Aurora
	// log: the line in message (or @message), the time in timestamp.
	CloudWatch Format = "cloudwatch-json"
	// Journald is journalctl -o json: the line in MESSAGE, the process in
	// _PID, the time in __REALTIME_TIMESTAMP.
	Journald Format = "journald-json"
	// CNPG is CloudNativePG's (and other operators') JSON: csvlog's
	// columns under "record", beside the operator's own messages.
	CNPG Format = "cnpg-json"
	// Azure is Azure Monitor's diagnostic export of Azure Database for
	// PostgreSQL: the message and its fields under "properties".
	Azure Format = "azure-json"
	// Logplex is Heroku's log drain: a syslog-like header, the database's
	// colour, syslog's sequence numbers, then the line.
	Logplex Format = "heroku-logplex"
	// Docker is Docker's json-file logging driver (the files under
	// /var/lib/docker/containers, what `docker logs` reads): each line the
	// container wrote to stderr in log, its time in time.
	Docker Format = "docker-json"
)

// jsonLine holds every field the JSON formats use; which ones a line has
// says which format wrote it.
type jsonLine struct {
	// PostgreSQL's jsonlog (15+). timestamp is a string there and in
	// Cloud Logging, a number of milliseconds in CloudWatch.
	Timestamp json.RawMessage `json:"timestamp"`
	User      string          `json:"user"`
	DB        string          `json:"dbname"`
	PID       int             `json:"pid"`
	Host      string          `json:"remote_host"`
	Level     string          `json:"error_severity"`
	State     string          `json:"state_code"`
	Message   string          `json:"message"`
	Detail    string          `json:"detail"`
	Hint      string          `json:"hint"`
	Context   string          `json:"context"`
	Statement string          `json:"statement"`
	App       string          `json:"application_name"`
	Session   string          `json:"session_id"`
	// CloudNativePG: the record, and the operator's own lines without one.
	Logger string       `json:"logger"`
	Msg    string       `json:"msg"`
	Record *namedRecord `json:"record"`
	// Cloud Logging.
	TextPayload *string `json:"textPayload"`
	// journald.
	JMessage json.RawMessage `json:"MESSAGE"`
	JPID     string          `json:"_PID"`
	JTime    string          `json:"__REALTIME_TIMESTAMP"`
	// CloudWatch Logs Insights.
	AtMessage   *string `json:"@message"`
	AtTimestamp string  `json:"@timestamp"`
	// Azure Monitor; time is Docker's too.
	Properties *azureProperties `json:"properties"`
	Time       string           `json:"time"`
	// Docker's json-file driver.
	DLog   *string `json:"log"`
	Stream string  `json:"stream"`
}

// namedRecord is csvlog's columns by name, as CloudNativePG writes them.
type namedRecord struct {
	LogTime   string `json:"log_time"`
	User      string `json:"user_name"`
	DB        string `json:"database_name"`
	PID       string `json:"process_id"`
	Client    string `json:"connection_from"`
	Level     string `json:"error_severity"`
	State     string `json:"sql_state_code"`
	Message   string `json:"message"`
	Detail    string `json:"detail"`
	Hint      string `json:"hint"`
	Context   string `json:"context"`
	Statement string `json:"query"`
	App       string `json:"application_name"`
	Session   string `json:"session_id"`
}

type azureProperties struct {
	Message   string `json:"message"`
	Detail    string `json:"detail"`
	Level     string `json:"errorLevel"`
	State     string `json:"sqlerrcode"`
	PID       int    `json:"processId"`
	Prefix    string `json:"prefix"`
	Statement string `json:"statement"`
}

// row is the row of the JSON format that wrote a line (nil when none
// pgmedic knows): the first row of formats whose is holds.
func (j *jsonLine) row() *formatRow {
	for i := range formats {
		if r := &formats[i]; r.is != nil && r.is(j) {
			return r
		}
	}
	return nil
}

// kind names the JSON format that wrote a line ("" when none pgmedic
// knows).
func (j *jsonLine) kind() Format {
	if r := j.row(); r != nil {
		return r.Format
	}
	return ""
}

// classifyJSON names the JSON format of a log from its first lines: the
// one most of them have (the first in the table on a tie).
func classifyJSON(lines []string) Format {
	votes := map[Format]int{}
	for _, l := range lines {
		var j jsonLine
		if json.Unmarshal([]byte(l), &j) == nil {
			if k := j.kind(); k != "" {
				votes[k]++
			}
		}
	}
	best, n := Format(""), 0
	for _, r := range formats {
		if votes[r.Format] > n {
			best, n = r.Format, votes[r.Format]
		}
	}
	return best
}

// entry is a line of a format that took PostgreSQL's line apart;
// notRecognised for a line of another kind.
func (j *jsonLine) entry() (Entry, lineKind) {
	if r := j.row(); r != nil && r.entry != nil {
		return r.entry(j)
	}
	return Entry{}, notRecognised
}

// PostgreSQL's jsonlog (15+): the only format with error_severity at the
// top.
func isJSONLog(j *jsonLine) bool { return j.Level != "" }

func jsonLogEntry(j *jsonLine) (Entry, lineKind) {
	return Entry{Time: parseTime(jsonString(j.Timestamp)), User: j.User, Database: j.DB, PID: j.PID, Client: j.Host, Level: j.Level,
		SQLState: j.State, Message: j.Message, Detail: j.Detail, Hint: j.Hint, Context: j.Context, Statement: j.Statement, App: j.App, Session: j.Session}, carries
}

// CloudNativePG: csvlog's columns under record, beside the operator's
// own messages (msg, no record).
func isCNPG(j *jsonLine) bool { return j.Record != nil || j.Msg != "" }

func cnpgEntry(j *jsonLine) (Entry, lineKind) {
	r := j.Record
	if r == nil || r.Level == "" {
		return Entry{}, other // the operator's own message
	}
	pid, _ := strconv.Atoi(r.PID)
	return Entry{Time: parseTime(r.LogTime), User: r.User, Database: r.DB, PID: pid, Client: hostOf(r.Client), Level: r.Level,
		SQLState: r.State, Message: r.Message, Detail: r.Detail, Hint: r.Hint, Context: r.Context, Statement: r.Statement, App: r.App, Session: r.Session}, carries
}

// Azure Monitor: the message and its fields under properties.
func isAzure(j *jsonLine) bool { return j.Properties != nil && j.Properties.Level != "" }

func azureEntry(j *jsonLine) (Entry, lineKind) {
	p := j.Properties
	if p == nil {
		return Entry{}, notRecognised
	}
	e := Entry{Time: parseAnyTime(j.Time), PID: p.PID, Level: p.Level, SQLState: p.State, Message: p.Message, Detail: p.Detail, Statement: p.Statement}
	// The prefix field holds what log_line_prefix printed: the
	// session's user and database, when it names them.
	if pe, ok := azurePrefix().parse(p.Prefix + "LOG:  x"); ok {
		e.User, e.Database = pe.User, pe.Database
	}
	return e, carries
}

// azurePrefix reads the prefix field of Azure's export (its servers use
// "%t-%c-", customers add "%u@%d" and the like).
var azurePrefix = sync.OnceValue(func() *Prefix {
	p, _ := CompilePrefix("%t-%c-%q%u@%d")
	return p
})

// Cloud Logging: the line in textPayload.
func isCloudSQL(j *jsonLine) bool { return j.TextPayload != nil }

func cloudSQLText(j *jsonLine) (syslogLine, lineKind) {
	var l syslogLine
	if j.TextPayload == nil {
		return l, notRecognised
	}
	l.text, l.at = *j.TextPayload, parseAnyTime(jsonString(j.Timestamp))
	// Cloud SQL's prefix starts "[pid]: [line-piece] ".
	if m := cloudSQLHead().FindStringSubmatch(l.text); m != nil {
		l.pid, _ = strconv.Atoi(m[1])
		l.seq = m[2]
		l.chunk, _ = strconv.Atoi(m[3])
		l.text = l.text[len(m[0]):]
	}
	return l, carries
}

// journald: the line in MESSAGE.
func isJournald(j *jsonLine) bool { return j.JMessage != nil }

func journaldText(j *jsonLine) (syslogLine, lineKind) {
	var l syslogLine
	if j.JMessage == nil {
		return l, notRecognised
	}
	l.text = journalText(j.JMessage)
	l.pid, _ = strconv.Atoi(j.JPID)
	if us, err := strconv.ParseInt(j.JTime, 10, 64); err == nil {
		l.at = time.UnixMicro(us).UTC()
	}
	// PostgreSQL logging to syslog under systemd: syslog's sequence
	// numbers start the text.
	if m := sequenceHead().FindStringSubmatch(l.text); m != nil {
		l.seq = m[1]
		l.chunk, _ = strconv.Atoi(m[2])
		l.text = l.text[len(m[0]):]
	}
	return l, carries
}

// Docker's json-file driver: each line the container wrote in log, with
// the stream it went to.
func isDocker(j *jsonLine) bool { return j.DLog != nil && j.Stream != "" }

func dockerText(j *jsonLine) (syslogLine, lineKind) {
	if j.DLog == nil {
		return syslogLine{}, notRecognised
	}
	// One record a line written, a statement's later lines in records of
	// their own, as in a stderr file.
	return syslogLine{text: strings.TrimSuffix(*j.DLog, "\n"), at: parseAnyTime(j.Time)}, carries
}

// CloudWatch Logs: a message (or Logs Insights' @message) and a time,
// nothing of its own; its row comes after the other JSON formats'.
func isCloudWatch(j *jsonLine) bool { return j.Message != "" || j.AtMessage != nil }

func cloudWatchText(j *jsonLine) (syslogLine, lineKind) {
	var l syslogLine
	switch {
	case j.AtMessage != nil:
		l.text, l.at = *j.AtMessage, parseAnyTime(j.AtTimestamp)
	case j.Message != "":
		l.text = j.Message
		if ms, err := strconv.ParseInt(string(j.Timestamp), 10, 64); err == nil {
			l.at = time.UnixMilli(ms).UTC()
		} else {
			l.at = parseAnyTime(jsonString(j.Timestamp))
		}
	default:
		return l, notRecognised
	}
	return l, carries
}

var cloudSQLHead = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(\d+)\]: \[(\d+)-(\d+)\] ?`) })
var sequenceHead = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(\d+)-(\d+)\] `) })

// journalText is journald's MESSAGE: a string, or an array of bytes when
// the text was not valid UTF-8.
func journalText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b []byte
	var ints []int
	if json.Unmarshal(raw, &ints) == nil {
		for _, i := range ints {
			b = append(b, byte(i))
		}
	}
	return string(b)
}

func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// parseAnyTime reads the RFC 3339 times of cloud exports and PostgreSQL's
// own.
func parseAnyTime(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC()
	}
	return parseTime(v)
}

// carriedTexts are the PostgreSQL lines in a JSON carrier's first lines,
// for detecting the log_line_prefix inside them.
func carriedTexts(f Format, lines []string) []string {
	text := carrierText(f)
	var out []string
	for _, raw := range lines {
		var j jsonLine
		if json.Unmarshal([]byte(raw), &j) != nil {
			continue
		}
		if l, k := text(&j); k == carries && l.chunk <= 1 {
			out = append(out, strings.TrimLeft(l.text, " "))
		}
	}
	return out
}

// unwrapJSON is readCarried's unwrap for a JSON carrier.
func unwrapJSON(f Format) func(string) (syslogLine, lineKind) {
	text := carrierText(f)
	return func(raw string) (syslogLine, lineKind) {
		var j jsonLine
		if json.Unmarshal([]byte(raw), &j) != nil {
			return syslogLine{}, notRecognised
		}
		return text(&j)
	}
}

// carrierText is carrier format f's text function, looked up once for a
// whole log: the PostgreSQL line each of its lines holds, with what the
// carrier says of it (notRecognised for every line of a format that
// carries none).
func carrierText(f Format) func(*jsonLine) (syslogLine, lineKind) {
	if r := rowOf(f); r.text != nil {
		return r.text
	}
	return func(*jsonLine) (syslogLine, lineKind) { return syslogLine{}, notRecognised }
}

// carriedPrefixes are the log_line_prefix values of the services, tried
// on the lines their carriers hold: Cloud SQL's (after its "[pid]: [n-1]"),
// Heroku's, Azure's single server's.
var carriedPrefixes = []string{
	"db=%d,user=%u ",
	"sql_error_code = %e ",
	"sql_error_code = %e %q%u@%d ",
	"%t-%c-",
	"%m [%p]: [%l-1] db=%d,user=%u ",
	"",
}

// logplexRe reads a Heroku log drain's line: the time, the source
// (app[postgres.PID]), the database's colour, syslog's sequence numbers,
// and the text.
var logplexRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) (?:\S+ )?app\[postgres\.(\d+)\]:? (?:\[[A-Z0-9_]+\] )?(?:\[(\d+)-(\d+)\] )?(.*)$`)
})

func parseLogplex(line string) (syslogLine, bool) {
	m := logplexRe().FindStringSubmatch(line)
	if m == nil {
		return syslogLine{}, false
	}
	l := syslogLine{seq: m[3], text: m[5], at: parseAnyTime(m[1])}
	l.pid, _ = strconv.Atoi(m[2])
	l.chunk, _ = strconv.Atoi(m[4])
	return l, true
}

// logplexTexts are the message texts of a logplex head; ok when most lines
// are logplex lines.
func logplexTexts(lines []string) ([]string, bool) {
	var texts []string
	n := 0
	for _, l := range lines {
		s, ok := parseLogplex(l)
		if !ok {
			continue
		}
		n++
		if s.chunk <= 1 {
			texts = append(texts, strings.TrimLeft(s.text, " "))
		}
	}
	return texts, n*2 >= len(lines) && n > 0
}

func readLogplex(r io.Reader, p *Prefix, fn func(Entry)) (Stats, error) {
	return readCarried(r, p, fn, func(raw string) (syslogLine, lineKind) {
		// Heroku's router and the app's own dynos share the drain.
		if l, ok := parseLogplex(raw); ok {
			return l, carries
		}
		if herokuOther().MatchString(raw) {
			return syslogLine{}, other
		}
		return syslogLine{}, notRecognised
	})
}

var herokuOther = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:\S+ )?(?:app|heroku)\[[\w.-]+\]:? `)
})
