package twin

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// A database's default collation decides how every text column without
// its own COLLATE sorts and compares: the order of ORDER BY, whether a
// plain B-tree index serves LIKE 'abc%' (only under C), what a sort costs
// (strcoll or ICU against memcmp). A twin whose default differs from the
// target's can prove the wrong thing, so the twin's database is created
// with the target's, and when this machine cannot, the report says how it
// differs.

// dbLocale is a database's encoding and default collation, as
// pg_database holds them.
type dbLocale struct {
	encoding, collate, ctype string
	// provider is libc's "c", ICU's "i" or the builtin "b" (17+); locale
	// is the ICU or builtin locale.
	provider, locale string
}

// readLocale reads the connected database's locale. The columns differ
// by version (datlocprovider and daticulocale from 15, datlocale from 17),
// so the row is read as JSON and absent columns mean libc.
func readLocale(ctx context.Context, conn *pgx.Conn, tag string) (dbLocale, error) {
	var l dbLocale
	err := conn.QueryRow(ctx, tag+`SELECT pg_encoding_to_char(d.encoding)::text, d.datcollate::text, d.datctype::text,
		coalesce(to_jsonb(d)->>'datlocprovider', 'c'), coalesce(to_jsonb(d)->>'datlocale', to_jsonb(d)->>'daticulocale', '')
		FROM pg_database d WHERE d.datname = current_database()`).Scan(&l.encoding, &l.collate, &l.ctype, &l.provider, &l.locale)
	return l, err
}

func (l dbLocale) String() string {
	switch l.provider {
	case "i":
		return fmt.Sprintf("ICU %s", l.locale)
	case "b":
		return fmt.Sprintf("builtin %s", l.locale)
	}
	return fmt.Sprintf("libc %s", l.collate)
}

// same says whether two databases sort text alike.
func (l dbLocale) same(o dbLocale) bool {
	if l.provider != o.provider {
		return false
	}
	if l.provider == "c" {
		return l.collate == o.collate
	}
	return l.locale == o.locale
}

// createOptions are CREATE DATABASE's options for this locale.
func (l dbLocale) createOptions() string {
	s := fmt.Sprintf(" TEMPLATE template0 ENCODING %s LC_COLLATE %s LC_CTYPE %s", sqlparse.QuoteLiteral(l.encoding), sqlparse.QuoteLiteral(l.collate), sqlparse.QuoteLiteral(l.ctype))
	switch l.provider {
	case "i":
		s += " LOCALE_PROVIDER icu ICU_LOCALE " + sqlparse.QuoteLiteral(l.locale)
	case "b":
		s += " LOCALE_PROVIDER builtin BUILTIN_LOCALE " + sqlparse.QuoteLiteral(l.locale)
	}
	return s
}

// fallbacks are the locales to try, in order, when the target's cannot be
// created here (a libc locale this machine has not generated): the same
// with C for libc's part (an ICU or builtin default does not depend on
// it), then, for a libc collation on a server with ICU (15+), the ICU
// locale of its language, which orders text nearly as glibc does, and
// last C. Each but the first is an approximation the report names.
func (l dbLocale) fallbacks(major int) []dbLocale {
	out := []dbLocale{l}
	if l.provider != "c" {
		out = append(out, dbLocale{encoding: l.encoding, collate: "C", ctype: "C", provider: l.provider, locale: l.locale})
	} else if tag := icuTag(l.collate); tag != "" && pgversion.ForMajor(major).ICULocale {
		out = append(out, dbLocale{encoding: l.encoding, collate: "C", ctype: "C", provider: "i", locale: tag})
	}
	return append(out, dbLocale{encoding: l.encoding, collate: "C", ctype: "C", provider: "c"})
}

// icuTag turns a libc locale name (en_US.UTF-8, de_DE@euro) into an ICU
// language tag (en-US, de-DE); "" for C and POSIX, which sort by bytes.
func icuTag(libc string) string {
	name, _, _ := strings.Cut(libc, ".")
	name, _, _ = strings.Cut(name, "@")
	if name == "" || name == "C" || name == "POSIX" {
		return ""
	}
	return strings.ReplaceAll(name, "_", "-")
}

// createDatabase creates the twin's database on a lab cluster with the
// target's locale, or the nearest this machine has; it returns the
// locale used and, when it is not the target's, what differs.
func createDatabase(ctx context.Context, admin *pgx.Conn, target dbLocale, major int) (used dbLocale, differs string, err error) {
	var firstErr error
	for i, l := range target.fallbacks(major) {
		_, err := admin.Exec(ctx, "CREATE DATABASE "+DBName+l.createOptions())
		if err == nil {
			if i > 0 {
				differs = localeDiffers(target, l, firstErr)
			}
			return l, differs, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return dbLocale{}, "", fmt.Errorf("creating the twin's database: %s", envelope.Message(firstErr))
}

// localeDiffers says how the twin's default collation differs from the
// target's, and why.
func localeDiffers(target, twin dbLocale, why error) string {
	s := fmt.Sprintf("default collation %s where the target has %s", twin, target)
	if twin.same(target) {
		s = fmt.Sprintf("LC_COLLATE/LC_CTYPE C where the target has %s (its %s collation is the same)", target.collate, target)
	}
	if why != nil {
		s += " (" + envelope.Message(why) + ")"
	}
	if target.provider == "c" && !twin.same(target) {
		s += fmt.Sprintf(": generate the locale on this machine (locale-gen %s) or give a --twin-dsn that has it", target.collate)
	}
	return s
}
