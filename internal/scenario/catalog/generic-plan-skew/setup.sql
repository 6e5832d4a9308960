-- 80,000 events of 2,001 tenants: tenant 1, the big customer, holds 90%
-- of them; every other tenant a handful. 20,000 accounts.
CREATE TABLE accounts (id int PRIMARY KEY, plan text NOT NULL, region text NOT NULL);
INSERT INTO accounts SELECT g, 'plan-' || (g % 5), 'r' || (g % 12) FROM generate_series(1, 20000) g;
CREATE TABLE events (id bigint PRIMARY KEY, tenant_id int NOT NULL, account_id int NOT NULL, created_at timestamptz NOT NULL, payload text NOT NULL);
INSERT INTO events SELECT g, CASE WHEN g % 10 = 0 THEN 2 + (g / 10) % 2000 ELSE 1 END, 1 + (g * 7919) % 20000, timestamptz '2026-01-01' + g * interval '1 second', md5(g::text) FROM generate_series(1, 80000) g;
CREATE INDEX events_tenant ON events (tenant_id);
ANALYZE accounts, events;
