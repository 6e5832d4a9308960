-- A seat reservation service. Holds on seats are renewed all day: every
-- renewal is an UPDATE, and VACUUM has to clear the versions it leaves.
-- Payments are committed in two phases with the payment provider's
-- coordinator (PREPARE TRANSACTION, then COMMIT PREPARED).
CREATE TABLE seat_holds (seat_id int PRIMARY KEY, event_id int NOT NULL, holder text, held_until timestamptz NOT NULL);
INSERT INTO seat_holds SELECT g, g % 40, NULL, now() FROM generate_series(1, 20000) g;
CREATE TABLE payments (id bigint PRIMARY KEY, seat_id int NOT NULL, amount_cents int NOT NULL, state text NOT NULL);
INSERT INTO payments SELECT g, g, 4500, 'captured' FROM generate_series(1, 5000) g;
