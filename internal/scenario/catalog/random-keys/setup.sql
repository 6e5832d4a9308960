CREATE TABLE uploads (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO uploads (name) SELECT 'file-' || g FROM generate_series(1, 300000) g;
CREATE TABLE image_hashes (id bytea PRIMARY KEY, url text NOT NULL);
INSERT INTO image_hashes (id, url) SELECT sha256(('https://img.example.com/' || g)::bytea), 'https://img.example.com/' || g FROM generate_series(1, 300000) g;
CREATE TABLE image_links_seq (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, url text NOT NULL);
INSERT INTO image_links_seq (url) SELECT 'https://img.example.com/' || g FROM generate_series(1, 300000) g;
ANALYZE uploads, image_hashes, image_links_seq;
