CREATE TABLE exported (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id bigint NOT NULL, exported_at timestamptz NOT NULL DEFAULT now());
