-- A product catalogue refreshed by a nightly import: every row inserted
-- again from the supplier's feed, then every price updated. The server's
-- max_wal_size was left at a small value from a disk-constrained past
-- (the workload sets it, as ALTER SYSTEM would have, and restores it).
CREATE TABLE catalogue_items (sku bigint PRIMARY KEY, supplier int NOT NULL, title text NOT NULL, price_cents int NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX catalogue_items_supplier ON catalogue_items (supplier);
