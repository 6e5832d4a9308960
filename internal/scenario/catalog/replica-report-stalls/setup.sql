-- Ride-hailing trips, written on the primary and reported on from a
-- streaming replica.
CREATE TABLE trips (id bigint PRIMARY KEY, rider_id int NOT NULL, driver_id int NOT NULL, fare_cents int NOT NULL,
  city text NOT NULL, finished_at timestamptz NOT NULL);
INSERT INTO trips SELECT g, g % 20000, g % 3000, 500 + g % 4000, 'city-' || g % 40, now() - g * interval '1 minute'
  FROM generate_series(1, 100000) g;
VACUUM ANALYZE trips;
