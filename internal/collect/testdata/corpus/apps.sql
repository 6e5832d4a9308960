-- What application code writes by hand: JSON operators, aggregates with
-- FILTER, date arithmetic on literals, array operators, recursive CTEs,
-- EXISTS checks, conditional upserts, literal-only expressions.
SELECT "users".* FROM "users" WHERE "users"."id" IN (SELECT "posts"."user_id" FROM "posts" WHERE "posts"."published" = TRUE);
SELECT id FROM blog_post WHERE meta ->> 'lang' = 'en' AND meta @> '{"draft": false}';
SELECT jsonb_build_object('id', id, 'title', title) FROM blog_post WHERE id = 1;
SELECT to_char(created_at, 'YYYY-MM') AS month, count(*) FILTER (WHERE kind = 'refund') AS refunds, coalesce(sum(amount), 0) FROM events GROUP BY 1;
SELECT EXISTS (SELECT 1 FROM users WHERE email = 'x@example.com');
SELECT CASE WHEN qty > 10 THEN 'many' WHEN qty > 0 THEN 'some' ELSE 'none' END FROM inventory;
INSERT INTO inventory AS t (sku, qty, updated) VALUES ('D-1', 4, '2024-05-01 10:00:00+00') ON CONFLICT (sku) DO UPDATE SET qty = EXCLUDED.qty, updated = EXCLUDED.updated WHERE t.updated < EXCLUDED.updated;
SELECT * FROM posts ORDER BY created_at DESC NULLS LAST LIMIT 10 OFFSET 0;
SELECT date_part('epoch', now() - created_at) FROM events WHERE id = 3;
WITH RECURSIVE chain(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM chain WHERE n < 5) SELECT sum(n) FROM chain;
SELECT sku FROM inventory WHERE qty BETWEEN SYMMETRIC 10 AND 1;
SELECT id FROM users WHERE lower(email) = lower('Bob@Example.com');
SELECT round(amount::numeric, 2), amount * 1.1 + 0.5 FROM events WHERE kind = 'sale';
SELECT sku FROM inventory WHERE sku LIKE ANY (ARRAY['A%', 'B%']);
SELECT created_at::date - 1 FROM events WHERE id = 4;
SELECT interval '1 day' * 2, '2024-01-01'::date + 7;
SELECT make_interval(days => 3), now() AT TIME ZONE 'UTC';
SELECT NULLIF(name, '') FROM users WHERE id = 5;
SELECT greatest(amount, 0) FROM events WHERE id = 6;
SELECT string_agg(sku, ', ' ORDER BY sku), array_agg(qty) FROM inventory WHERE qty > 0;
SELECT id FROM blog_post WHERE tags && ARRAY['pg', 'sql'] AND cardinality(tags) > 1;
SELECT id FROM events WHERE tenant = ANY ('{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'::uuid[]);
SELECT count(*) FROM events WHERE created_at > now() - make_interval(hours => 6);
SELECT id, row_number() OVER (ORDER BY amount DESC) FROM events WHERE amount > 100 LIMIT 3;
UPDATE users SET name = coalesce(name, 'anonymous'), updated_at = now() WHERE id = 9;
SELECT 'a' = 'b', 1 < 2;
SELECT substring(email FROM 3 FOR 4), position('@' IN email), trim(BOTH ' ' FROM name) FROM users WHERE id = 1;
SELECT id FROM posts WHERE (user_id, id) > (3, 100) ORDER BY user_id, id LIMIT 50;
