-- A realistic application catalogue: many wide tables.
DO $$ BEGIN FOR t IN 0..39 LOOP
  EXECUTE format('CREATE TABLE wide_%s (id bigint PRIMARY KEY, %s)', t,
    (SELECT string_agg(format('c%s text', c), ', ' ORDER BY c) FROM generate_series(0, 99) c));
END LOOP; END $$;
CREATE TYPE order_status AS ENUM ('new', 'paid', 'shipped');
