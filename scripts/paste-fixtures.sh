#!/usr/bin/env bash
# Regenerates internal/plan/testdata/pasted: one TEXT and one JSON plan as
# people paste them, printed by real psql in every dress it has:
# \pset border 0/1/2 x linestyle ascii/old-ascii/unicode x aligned/unaligned
# x expanded off/on, plus psql --csv and a CSV export with every row quoted
# (what pgAdmin and DBeaver write). Each plan is EXPLAINed once and stored,
# so every file holds the same plan and the test can compare them exactly
# with the plain output (<fmt>.plain). Run from the repository root:
#
#   bash scripts/paste-fixtures.sh
set -euo pipefail
out=internal/plan/testdata/pasted
source "$(dirname "$0")/lab.sh"
rm -rf "$out"
mkdir -p "$out"

psql <<'SQL'
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, "Kind|Label" text);
INSERT INTO accounts SELECT g, 'o' || (g % 97), 'k' || (g % 3) FROM generate_series(1, 20000) g;
CREATE TABLE transfers (id int PRIMARY KEY, account_id int NOT NULL, amount numeric NOT NULL);
INSERT INTO transfers SELECT g, 1 + g % 20000, g % 500 FROM generate_series(1, 60000) g;
VACUUM ANALYZE;
CREATE TABLE pasted (fmt text, n int, line text);
CREATE FUNCTION keep(fmt text, q text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r text; i int := 0;
BEGIN
  FOR r IN EXECUTE q LOOP
    i := i + 1;
    INSERT INTO pasted VALUES (fmt, i, r);
  END LOOP;
END $$;
SELECT keep('text', $q$EXPLAIN (ANALYZE, BUFFERS, VERBOSE)
  SELECT a.owner, a."Kind|Label", sum(t.amount) FROM accounts a JOIN transfers t ON t.account_id = a.id
  WHERE a.owner IN ('o1', 'o2') AND t.amount > 100 GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 5$q$);
SELECT keep('json', $q$EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON)
  SELECT a.owner, sum(t.amount) FROM accounts a JOIN transfers t ON t.account_id = a.id
  WHERE a.owner = 'o1' GROUP BY 1$q$);
SQL

sel() { echo "SELECT line AS \"QUERY PLAN\" FROM pasted WHERE fmt = '$1' ORDER BY n"; }
for fmt in text json; do
  psql -A -t -c "$(sel $fmt)" >"$out/$fmt.plain"
  for border in 0 1 2; do
    for style in ascii old-ascii unicode; do
      for align in aligned unaligned; do
        for x in off on; do
          name="$fmt.border$border.$style.$align"
          [ "$x" = on ] && name="$name.expanded"
          a=()
          [ "$align" = unaligned ] && a=(-A)
          psql "${a[@]}" -P border=$border -P linestyle=$style -P expanded=$x -c "$(sel $fmt)" >"$out/$name"
        done
      done
    done
  done
  # psql's wrapped format cuts long lines at the terminal width and marks
  # the cut ('.' ascii, '…' unicode); old-ascii marks nothing, so a cut
  # inside a word cannot be undone there and it is left out.
  for border in 0 1 2; do
    for style in ascii unicode; do
      psql -P border=$border -P linestyle=$style -P format=wrapped -P columns=72 -c "$(sel $fmt)" >"$out/$fmt.border$border.$style.wrapped"
    done
  done
  # Double-line unicode frames.
  psql -P border=2 -P linestyle=unicode -P unicode_border_linestyle=double -P unicode_header_linestyle=double \
    -P unicode_column_linestyle=double -c "$(sel $fmt)" >"$out/$fmt.border2.unicode-double.aligned"
  psql -P border=2 -P linestyle=unicode -P unicode_border_linestyle=double -P expanded=on -c "$(sel $fmt)" >"$out/$fmt.border2.unicode-double.aligned.expanded"
  psql --csv -c "$(sel $fmt)" >"$out/$fmt.csv"
  psql -c "COPY ($(sel $fmt)) TO STDOUT (FORMAT csv, HEADER, FORCE_QUOTE *)" >"$out/$fmt.quoted-rows"
done
ls "$out" | wc -l
