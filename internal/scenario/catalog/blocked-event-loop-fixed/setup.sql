CREATE TABLE exported_ok (event_id bigint PRIMARY KEY, exported_at timestamptz NOT NULL DEFAULT now());
