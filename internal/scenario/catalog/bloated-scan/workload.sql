-- pgmedic: repeat 40
SELECT count(*), max(id) FROM events WHERE category = 25;
