-- What Django's ORM sends (quoted names, LIMIT 21 for get(), __count).
SELECT "auth_user"."id", "auth_user"."password", "auth_user"."last_login", "auth_user"."is_superuser", "auth_user"."username", "auth_user"."email", "auth_user"."is_active", "auth_user"."date_joined" FROM "auth_user" WHERE "auth_user"."username" = 'alice' LIMIT 21;
UPDATE "auth_user" SET "last_login" = '2024-05-01T10:00:00+00:00'::timestamptz WHERE "auth_user"."id" = 1;
INSERT INTO "blog_post" ("author_id", "title", "body", "published_at", "views", "tags", "meta") VALUES (1, 'Hello', 'Body', '2024-05-01T10:00:00+00:00'::timestamptz, 0, ARRAY['a','b']::text[], '{"k": 1}'::jsonb) RETURNING "blog_post"."id";
SELECT COUNT(*) AS "__count" FROM "blog_post" WHERE ("blog_post"."author_id" = 1 AND "blog_post"."published_at" IS NOT NULL);
SELECT "blog_post"."id", "blog_post"."title" FROM "blog_post" WHERE UPPER("blog_post"."title"::text) LIKE UPPER('%postgres%') ORDER BY "blog_post"."published_at" DESC LIMIT 20 OFFSET 40;
SELECT "blog_post"."id" FROM "blog_post" WHERE "blog_post"."id" IN (1, 2, 3, 4) ORDER BY "blog_post"."id" ASC;
SELECT (1) AS "a" FROM "auth_user" WHERE "auth_user"."email" = 'a@example.com' LIMIT 1;
SELECT "blog_post"."id" FROM "blog_post" WHERE "blog_post"."tags" @> ARRAY['pg']::text[] AND ("blog_post"."meta" -> 'lang') = '"en"'::jsonb;
SELECT "blog_post"."id" FROM "blog_post" WHERE "blog_post"."published_at" >= '2024-01-01T00:00:00+00:00'::timestamptz AND "blog_post"."published_at" < '2024-02-01T00:00:00+00:00'::timestamptz;
SELECT DATE_TRUNC('day', "blog_post"."published_at" AT TIME ZONE 'UTC') AS "day", COUNT("blog_post"."id") AS "n" FROM "blog_post" GROUP BY 1 ORDER BY 1;
UPDATE "blog_post" SET "views" = ("blog_post"."views" + 1) WHERE "blog_post"."id" = 7;
DELETE FROM "blog_post" WHERE "blog_post"."author_id" IN (5, 6);
