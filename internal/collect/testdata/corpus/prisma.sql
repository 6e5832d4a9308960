-- What Prisma's query engine sends (schema-qualified quoted names).
SELECT "public"."User"."id", "public"."User"."email", "public"."User"."name" FROM "public"."User" WHERE ("public"."User"."email" = 'eve@example.com' AND 1=1) LIMIT 1 OFFSET 0;
INSERT INTO "public"."User" ("id","email","name","createdAt") VALUES ('u1','eve@example.com','Eve','2024-05-01 10:00:00') RETURNING "public"."User"."id", "public"."User"."email";
INSERT INTO "public"."Post" ("id","title","published","authorId") VALUES ('p1','Hi',false,'u1') RETURNING "public"."Post"."id";
SELECT COUNT(*) FROM (SELECT "public"."Post"."id" FROM "public"."Post" WHERE "public"."Post"."published" = true OFFSET 0) AS "sub";
UPDATE "public"."Post" SET "published" = true WHERE ("public"."Post"."id" = 'p1' AND 1=1) RETURNING "public"."Post"."id";
SELECT "t1"."id", "t1"."title" FROM "public"."Post" AS "t1" WHERE "t1"."authorId" IN ('u1','u2') ORDER BY "t1"."id" ASC LIMIT 10 OFFSET 0;
