-- Meter readings partitioned by month over two years: 24 partitions of
-- about 10,000 rows, each with an index on taken_at.
CREATE TABLE readings (meter_id int NOT NULL, taken_at timestamptz NOT NULL, kwh numeric(8, 3) NOT NULL) PARTITION BY RANGE (taken_at);
DO $$
BEGIN
  FOR m IN 0..23 LOOP
    EXECUTE format('CREATE TABLE readings_%s PARTITION OF readings FOR VALUES FROM (%L) TO (%L)',
      to_char(timestamptz '2024-01-01 00:00+00' + m * interval '1 month', 'YYYY_MM'),
      timestamptz '2024-01-01 00:00+00' + m * interval '1 month', timestamptz '2024-01-01 00:00+00' + (m + 1) * interval '1 month');
  END LOOP;
END $$;
CREATE INDEX readings_taken_at ON readings (taken_at);
INSERT INTO readings SELECT g % 400, timestamptz '2024-01-01 00:00+00' + g * interval '5 minutes' / 2, (g % 97) / 10.0 FROM generate_series(0, 249999) g;
ANALYZE readings;
