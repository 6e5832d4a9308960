CREATE TABLE exports (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, batch text NOT NULL, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
