-- pgmedic: repeat 2
SELECT id, name, price FROM products WHERE name LIKE 'Cedar 1a%' ORDER BY name LIMIT 20;
SELECT id, name, price FROM products WHERE name LIKE 'Falcon 0f%' ORDER BY name LIMIT 20;
SELECT id, name, price FROM products WHERE name LIKE 'Brook 9c%' ORDER BY name LIMIT 20;
SELECT id, name, price FROM products WHERE name LIKE 'Ember 44%' ORDER BY name LIMIT 20;
SELECT id, name, price FROM products WHERE name LIKE 'Alpine d3%' ORDER BY name LIMIT 20;
SELECT id, name, price FROM products WHERE name LIKE 'Harbor 7e%' ORDER BY name LIMIT 20;
