-- pgmedic: repeat 3
SET work_mem = '64MB';
SELECT id, queue, subject, body FROM tickets ORDER BY opened_at DESC LIMIT 4000;
SELECT o.customer, o.placed_at, l.sku, l.amount FROM order_lines l JOIN orders o ON o.id = l.order_id;
