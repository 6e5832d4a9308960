CREATE TABLE ledger (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account_id int NOT NULL, amount numeric(12,2) NOT NULL, note text NOT NULL);
INSERT INTO ledger (account_id, amount, note) SELECT (g::bigint * 7919) % 100000, (g % 50000) / 100.0, md5(g::text) FROM generate_series(1, 300000) g;
CREATE INDEX ledger_account_idx ON ledger (account_id);
CREATE INDEX ledger_amount_idx ON ledger (amount);
CREATE TABLE ledger_ok (LIKE ledger INCLUDING ALL);
INSERT INTO ledger_ok (account_id, amount, note) SELECT account_id, amount, note FROM ledger;
VACUUM ANALYZE ledger, ledger_ok;
