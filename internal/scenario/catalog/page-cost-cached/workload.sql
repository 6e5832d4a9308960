-- pgmedic: repeat 3
SELECT f.customer_id, count(*), sum(o.total) FROM flagged f JOIN orders o ON o.customer_id = f.customer_id GROUP BY f.customer_id;
