package envelope

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// dsnFacts is what pgmedic learns from a connection string before handing
// it to pgx: the secrets it holds (so that no message ever repeats them) and
// the mistakes that libpq and pgx would misread instead of refusing.
type dsnFacts struct {
	// secrets are the password values found (userinfo, password=,
	// sslpassword=), decoded as the server would receive them and as
	// written in the string.
	secrets []string
	// problem is a mistake worth refusing outright, described without any
	// part of a secret.
	problem error
}

// secretKeys are the connection parameters whose values must never be shown.
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// inspectDSN reads a URL (postgres:// or postgresql://) or a libpq
// key=value string the way libpq tokenises it. It never fails: what it
// cannot read is left for pgx to refuse, and only the facts are returned.
func inspectDSN(dsn string) dsnFacts {
	var f dsnFacts
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if rest, ok := strings.CutPrefix(dsn, scheme); ok {
			f = inspectURL(rest)
			break
		}
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		f = inspectKeywords(dsn)
	}
	// A malformed string may not tokenise the way its author meant, and
	// pgx's complaint may quote any part of it: every value written after
	// a password key, wherever it stands, is kept secret too.
	f.secrets = append(f.secrets, looseSecrets(dsn)...)
	return f
}

// looseSecrets finds "password=" and "sslpassword=" anywhere in s (any
// case) and returns the value after each, quoted or up to a space or '&',
// with and without its quotes.
func looseSecrets(s string) []string {
	var out []string
	// Byte-wise ASCII lowering keeps offsets aligned with s (Unicode case
	// mapping, and invalid UTF-8, can change a string's length).
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	lower := string(b)
	for i := 0; ; {
		j := strings.Index(lower[i:], "password")
		if j < 0 {
			return out
		}
		k := i + j + len("password")
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		i = k
		if k >= len(s) || s[k] != '=' {
			continue
		}
		k++
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		end := k
		for end < len(s) && !isSpace(s[end]) && s[end] != '&' {
			end++
		}
		for _, v := range []string{s[k:end], strings.Trim(s[k:end], "'")} {
			if v != "" {
				out = append(out, v)
			}
		}
		i = end
	}
}

// inspectURL reads the part after the scheme. libpq looks for the user
// credentials up to the first '/' (or '?'); an '@' inside a password must be
// percent-encoded, or the host name silently becomes the tail of the password.
func inspectURL(rest string) dsnFacts {
	var f dsnFacts
	authority := rest
	if i := strings.IndexAny(authority, "/?"); i >= 0 {
		authority = authority[:i]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo := authority[:at]
		if strings.Count(authority, "@") > 1 {
			f.problem = errors.New("the connection URL has more than one '@' before the host, so part of the user name or password would be read as the host: percent-encode '@' as %40 inside the user name or password (postgres://user:p%40ss@host/db)")
		}
		if _, pw, ok := strings.Cut(userinfo, ":"); ok {
			f.addSecret(pw)
		} else if f.problem != nil {
			// No ':' at all: the whole userinfo may be a password that
			// holds an '@'; keep it out of every message.
			f.addSecret(userinfo)
		}
	}
	if _, query, ok := strings.Cut(rest, "?"); ok {
		for _, pair := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(pair, "=")
			if secretKeys[strings.ToLower(k)] {
				f.addSecret(v)
			}
		}
	}
	return f
}

// addSecret keeps a secret both as written and percent-decoded.
func (f *dsnFacts) addSecret(s string) {
	if s == "" {
		return
	}
	f.secrets = append(f.secrets, s)
	if d, err := url.PathUnescape(s); err == nil && d != s && d != "" {
		f.secrets = append(f.secrets, d)
	}
}

// inspectKeywords tokenises libpq's "key = value key2='quoted \' value'"
// syntax: spaces around '=' are allowed, a value is either single-quoted
// (backslash escapes any character) or runs to the next space.
func inspectKeywords(s string) dsnFacts {
	var f dsnFacts
	i := 0
	skipSpace := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(s) {
			return f
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		skipSpace()
		if i >= len(s) || s[i] != '=' {
			f.problem = fmt.Errorf("the connection string has a word without '=' after it (byte %d): write key=value pairs (host=db.example.com dbname=shop) or a postgres:// URL", start+1)
			return f
		}
		i++ // '='
		skipSpace()
		var val strings.Builder
		raw := i
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					val.WriteByte(s[i+1])
					i += 2
					continue
				}
				if c == '\'' {
					closed = true
					i++
					break
				}
				val.WriteByte(c)
				i++
			}
			if !closed {
				if secretKeys[strings.ToLower(key)] {
					f.secrets = append(f.secrets, s[raw+1:], val.String())
				}
				f.problem = fmt.Errorf("the value of %s in the connection string opens a quote (') that is never closed: close it, and write a quote inside a value as \\'", nameKey(key))
				return f
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
		}
		if secretKeys[strings.ToLower(key)] {
			if v := val.String(); v != "" {
				f.secrets = append(f.secrets, v, s[raw:i])
			}
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// libpqKeywords are the connection parameters libpq knows. Only these are
// named in messages: any other word may be the tail of a mistyped password.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true, "passfile": true,
	"channel_binding": true, "connect_timeout": true, "client_encoding": true, "options": true, "application_name": true,
	"fallback_application_name": true, "keepalives": true, "keepalives_idle": true, "keepalives_interval": true,
	"keepalives_count": true, "tcp_user_timeout": true, "replication": true, "gssencmode": true, "sslmode": true,
	"sslcompression": true, "sslcert": true, "sslkey": true, "sslpassword": true, "sslrootcert": true, "sslcrl": true,
	"sslcrldir": true, "sslsni": true, "requirepeer": true, "ssl_min_protocol_version": true,
	"ssl_max_protocol_version": true, "krbsrvname": true, "gsslib": true, "service": true,
	"target_session_attrs": true, "load_balance_hosts": true, "sslnegotiation": true, "require_auth": true,
}

// nameKey names a keyword in a message, or stays vague about an unknown one.
func nameKey(k string) string {
	if libpqKeywords[strings.ToLower(k)] {
		return k
	}
	return "a parameter"
}

// minScrubbable is the shortest secret that is replaced inside a message.
// A shorter one would turn ordinary words into asterisks, so messages that
// might hold it are not shown at all (see Scrub).
const minScrubbable = 4

// scrub removes every secret from msg in one pass per secret. It reports
// false when a secret is too short to remove safely and msg contains it:
// the caller must then not show msg.
func (f dsnFacts) scrub(msg string) (string, bool) {
	// Longest first, so a secret that contains another is removed whole.
	secrets := append([]string(nil), f.secrets...)
	for i := 1; i < len(secrets); i++ {
		for j := i; j > 0 && len(secrets[j]) > len(secrets[j-1]); j-- {
			secrets[j], secrets[j-1] = secrets[j-1], secrets[j]
		}
	}
	for _, s := range secrets {
		if !strings.Contains(msg, s) {
			continue
		}
		if len(s) < minScrubbable {
			return "", false
		}
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg, true
}

// parseErrorText turns pgx's ParseConfig error into the part worth showing:
// pgx prefixes it with the whole connection string ("cannot parse `...`: "),
// which pgmedic never repeats; the secrets are then scrubbed from the rest.
func (f dsnFacts) parseErrorText(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 && strings.HasPrefix(msg, "cannot parse `") {
		msg = msg[i+3:]
	}
	if clean, ok := f.scrub(msg); ok {
		return clean
	}
	return "it could not be parsed"
}
