SELECT count(*), avg(value) FROM readings WHERE taken_at > (SELECT (now() - interval '400 days')::timestamp)
