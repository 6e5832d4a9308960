-- pgmedic: repeat 12
SELECT count(*) FROM payments WHERE account_id = 4711.0;
SELECT id, amount FROM payments WHERE amount = 12.5::float8;
SELECT id FROM payments WHERE merchant = 'm-000042'::text;
SELECT count(*) FROM payments WHERE booked_at::timestamptz > now() - interval '1 hour';
SELECT id FROM payments WHERE sku = 'sku-42'::text;
