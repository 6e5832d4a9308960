SELECT id, name FROM customers ORDER BY name, id OFFSET 119990
