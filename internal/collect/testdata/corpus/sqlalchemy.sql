-- What SQLAlchemy emits (labelled columns, anon subqueries, expanding IN).
SELECT users.id AS users_id, users.email AS users_email, users.name AS users_name FROM users WHERE users.email = 'bob@example.com' LIMIT 1;
INSERT INTO users (email, name, created_at, updated_at) VALUES ('c@example.com', 'Carol', '2024-05-01 10:00:00', '2024-05-01 10:00:00') RETURNING users.id;
SELECT count(*) AS count_1 FROM (SELECT posts.id AS posts_id FROM posts WHERE posts.user_id = 3 AND posts.published = true) AS anon_1;
SELECT posts.id, posts.title FROM posts WHERE posts.id IN (10, 11, 12) ORDER BY posts.created_at DESC;
SELECT users.id FROM users WHERE users.id = ANY (ARRAY[1, 2, 3]);
UPDATE users SET name = 'Bob', updated_at = '2024-05-02 09:00:00' WHERE users.id = 2;
SELECT users.name, count(posts.id) AS count_1 FROM users LEFT OUTER JOIN posts ON users.id = posts.user_id GROUP BY users.name HAVING count(posts.id) > 5;
SELECT coalesce(users.name, 'anonymous') AS name FROM users WHERE users.created_at > now() - interval '30 days';
