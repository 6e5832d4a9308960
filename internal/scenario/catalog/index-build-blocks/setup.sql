CREATE TABLE tickets (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account_id int NOT NULL, subject text NOT NULL);
INSERT INTO tickets (account_id, subject) SELECT g % 500, 'ticket ' || g FROM generate_series(1, 3000) g;
-- An index expression that costs a millisecond a row: the build is slow
-- enough to be seen, on a table small enough to load at once.
CREATE FUNCTION account_bucket(a int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(0.001);
  RETURN a % 16;
END $$;
ANALYZE tickets;
