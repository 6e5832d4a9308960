CREATE TABLE payments (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account_id int NOT NULL,
  amount numeric(12,2) NOT NULL, merchant char(12) NOT NULL, sku varchar(24) NOT NULL,
  booked_at timestamp NOT NULL, note text NOT NULL);
INSERT INTO payments (account_id, amount, merchant, sku, booked_at, note)
SELECT (g::bigint * 7919) % 100000, (g % 50000) / 100.0, 'm-' || lpad((g % 20000)::text, 6, '0'),
       'sku-' || (g % 30000), localtimestamp - (g % 86400) * interval '1 minute', md5(g::text)
  FROM generate_series(1, 300000) g;
CREATE INDEX payments_account_idx ON payments (account_id);
CREATE INDEX payments_amount_idx ON payments (amount);
CREATE INDEX payments_merchant_idx ON payments (merchant);
CREATE INDEX payments_sku_idx ON payments (sku);
CREATE INDEX payments_booked_idx ON payments (booked_at);
VACUUM ANALYZE payments;
