-- What Rails' ActiveRecord sends.
SELECT "users".* FROM "users" WHERE "users"."deleted_at" IS NULL AND "users"."email" = 'dan@example.com' LIMIT 1;
SELECT 1 AS one FROM "users" WHERE "users"."email" = 'dan@example.com' LIMIT 1;
INSERT INTO "users" ("email", "name", "created_at", "updated_at") VALUES ('dan@example.com', 'Dan', '2024-05-01 10:00:00.000000', '2024-05-01 10:00:00.000000') RETURNING "id";
UPDATE "posts" SET "published" = TRUE, "updated_at" = '2024-05-01 10:00:00.000000' WHERE "posts"."id" = 5;
SELECT "posts".* FROM "posts" WHERE "posts"."created_at" BETWEEN '2024-01-01 00:00:00' AND '2024-01-31 23:59:59' ORDER BY "posts"."id" DESC LIMIT 10 OFFSET 20;
SELECT COUNT(*) FROM "posts" WHERE "posts"."user_id" = 4 AND "posts"."published" = FALSE;
DELETE FROM "posts" WHERE "posts"."id" = 99;
SELECT "posts"."user_id", COUNT(*) AS count_all FROM "posts" GROUP BY "posts"."user_id";
