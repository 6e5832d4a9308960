CREATE TABLE accounts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text NOT NULL UNIQUE, balance numeric(12,2) NOT NULL DEFAULT 0);
CREATE TABLE transfers (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, from_id bigint NOT NULL REFERENCES accounts, to_id bigint NOT NULL REFERENCES accounts, amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX transfers_from_created_idx ON transfers (from_id, created_at DESC);
INSERT INTO accounts (email, balance) SELECT 'user' || g || '@example.com', 1000 FROM generate_series(1, 50000) g;
VACUUM ANALYZE accounts, transfers;
