-- Release 42, written to leave the application running: the ALTER gives
-- up after 50 ms rather than queue the readers behind the report, and
-- tries again after a pause; the index is built without blocking writes.
DO $$
BEGIN
  PERFORM set_config('lock_timeout', '50ms', true);
  FOR attempt IN 1..60 LOOP
    BEGIN
      ALTER TABLE orders ADD COLUMN note text;
      RETURN;
    EXCEPTION WHEN lock_not_available THEN
      PERFORM pg_sleep(least(0.1 * attempt, 1));
    END;
  END LOOP;
  RAISE EXCEPTION 'orders stayed locked: the note column was not added';
END
$$;
CREATE INDEX CONCURRENTLY orders_customer_idx ON orders (customer_id);
