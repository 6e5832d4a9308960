CREATE TABLE image_links (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, image_link text NOT NULL,
  download_after timestamptz NOT NULL, referenced_at timestamptz NOT NULL, queued_at timestamptz);
-- 1.2M links; the newest 48000 (4%) are still waiting
INSERT INTO image_links (image_link, download_after, referenced_at, queued_at)
SELECT 'https://img.example.com/' || g || '.jpg',
       now() - interval '30 days' + g * interval '2 seconds',
       now() - interval '30 days' + g * interval '2 seconds' + random() * interval '2 days',
       CASE WHEN g <= 1152000 THEN now() - interval '30 days' + g * interval '2 seconds' + interval '1 minute' END
  FROM generate_series(1, 1200000) g;
CREATE INDEX image_links_download_after_idx ON image_links (download_after);
VACUUM ANALYZE image_links;
