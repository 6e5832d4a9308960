-- A ledger whose entries table was given its own, low freeze age long
-- ago (autovacuum_freeze_max_age can only be lowered per table): an
-- anti-wraparound vacuum is due once 100,000 transactions have passed
-- since its oldest unfrozen row. The settlement service commits in two
-- phases; one of its prepared transactions was never finished.
CREATE TABLE ledger_entries (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account int NOT NULL, cents bigint NOT NULL,
  booked_at timestamptz NOT NULL DEFAULT now()) WITH (autovacuum_freeze_max_age = 100000);
INSERT INTO ledger_entries (account, cents) SELECT g % 1000, (g % 5000) - 2500 FROM generate_series(1, 50000) g;
-- Transactions, one per call, as the application's other services
-- consume them all day.
CREATE PROCEDURE consume_xids(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    PERFORM pg_current_xact_id();
    COMMIT;
  END LOOP;
END $$;
