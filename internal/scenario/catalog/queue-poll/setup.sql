CREATE TABLE image_links (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, image_link text NOT NULL,
  download_after timestamptz NOT NULL, referenced_at timestamptz NOT NULL, queued_at timestamptz);
-- 600k links over a month; the newest 24000 (4%) are still waiting
INSERT INTO image_links (image_link, download_after, referenced_at, queued_at)
SELECT 'https://img.example.com/' || g || '.jpg',
       now() - interval '30 days' + g * interval '4 seconds',
       now() - interval '30 days' + g * interval '4 seconds' + random() * interval '2 days',
       CASE WHEN g <= 576000 THEN now() - interval '30 days' + g * interval '4 seconds' + interval '1 minute' END
  FROM generate_series(1, 600000) g;
CREATE INDEX image_links_download_after_idx ON image_links (download_after);
VACUUM ANALYZE image_links;
