-- 200,000 shipments of 12 carriers, each serving 3 of 36 depots: a depot
-- belongs to one carrier. Filtering on both, the planner multiplies the
-- two selectivities (1/12 x 1/36) and expects about 460 shipments for any
-- pair, where a carrier's own depots hold 5,500 and every other pair none.
CREATE TABLE shipments (id int PRIMARY KEY, carrier int NOT NULL, depot int NOT NULL, weight numeric(8, 2) NOT NULL, label text NOT NULL);
INSERT INTO shipments SELECT g, g % 12, (g % 12) * 3 + (g / 12) % 3, (g % 500) / 10.0, md5(g::text) FROM generate_series(1, 200000) g;
CREATE INDEX shipments_carrier_depot ON shipments (carrier, depot);
CREATE STATISTICS shipments_carrier_depot (dependencies, ndistinct, mcv) ON carrier, depot FROM shipments;
ANALYZE shipments;
