CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer int NOT NULL, total numeric(12,2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE order_outbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, channel text NOT NULL, payload text, created_at timestamptz NOT NULL DEFAULT now());
