-- A usage-based billing service: accounts, and the usage events a backfill
-- inserts for them, each referring to its account by a foreign key.
CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, plan text NOT NULL);
INSERT INTO accounts SELECT g, 'customer-' || g, CASE WHEN g % 3 = 0 THEN 'enterprise' ELSE 'growth' END FROM generate_series(1, 50) g;
CREATE TABLE usage_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id int NOT NULL REFERENCES accounts (id), meter text NOT NULL, quantity int NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX usage_events_account ON usage_events (account_id, recorded_at);
