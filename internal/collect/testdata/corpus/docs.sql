-- Shapes from the PostgreSQL documentation: upserts, MERGE, VALUES,
-- CTEs, window functions, arithmetic on literals.
INSERT INTO inventory (sku, qty) VALUES ('A-1', 5) ON CONFLICT (sku) DO UPDATE SET qty = inventory.qty + EXCLUDED.qty, updated = now();
INSERT INTO inventory (sku, qty) VALUES ('B-1', 1), ('B-2', 2), ('B-3', 3) ON CONFLICT DO NOTHING;
MERGE INTO inventory i USING (VALUES ('A-1', 3), ('C-1', 7)) AS v(sku, qty) ON i.sku = v.sku WHEN MATCHED THEN UPDATE SET qty = i.qty + v.qty WHEN NOT MATCHED THEN INSERT (sku, qty) VALUES (v.sku, v.qty);
WITH recent AS (SELECT author_id, count(*) AS n FROM blog_post WHERE published_at > now() - interval '7 days' GROUP BY author_id) SELECT u.username, r.n FROM recent r JOIN auth_user u ON u.id = r.author_id WHERE r.n > 3;
WITH moved AS (DELETE FROM jobs WHERE status = 'done' RETURNING id) SELECT count(*) FROM moved;
SELECT id, amount, sum(amount) OVER (PARTITION BY kind ORDER BY created_at ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM events WHERE kind = 'refund';
SELECT * FROM (VALUES (1, 'one'), (2, 'two')) AS t(n, word) WHERE n > 1;
SELECT 'prefix-' || 'suffix';
SELECT 2 + 3, 4 * 5.5;
SELECT greatest(1, 2, 3), least('a', 'b');
SELECT coalesce(NULL, 'fallback'), nullif(1, 1);
SELECT sku FROM inventory WHERE qty BETWEEN 1 AND 10 AND sku LIKE 'A%';
UPDATE inventory SET qty = qty - 1 WHERE sku = 'A-1' AND qty > 0 RETURNING qty;
INSERT INTO events (kind, created_at, amount, tenant) SELECT 'bulk', now() - (g * interval '1 minute'), g * 1.5, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' FROM generate_series(1, 3) g;
SELECT g FROM generate_series(timestamptz '2024-01-01', timestamptz '2024-01-02', interval '1 hour') AS g;
SELECT id FROM events WHERE amount > 10.5 LIMIT 5 OFFSET 10;
SELECT 1;
