-- Release 42: a note on each order, and customers' orders found by index.
ALTER TABLE orders ADD COLUMN note text;
CREATE INDEX orders_customer_idx ON orders (customer_id);
