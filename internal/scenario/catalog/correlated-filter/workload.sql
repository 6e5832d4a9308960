-- pgmedic: repeat 2
SELECT id, weight FROM shipments WHERE carrier = 5 AND depot = 16 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 5 AND depot = 7 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 2 AND depot = 6 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 2 AND depot = 30 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 9 AND depot = 27 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 9 AND depot = 4 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 0 AND depot = 1 ORDER BY id DESC LIMIT 20;
SELECT id, weight FROM shipments WHERE carrier = 0 AND depot = 20 ORDER BY id DESC LIMIT 20;
