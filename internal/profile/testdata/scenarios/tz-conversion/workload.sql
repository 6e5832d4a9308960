SELECT count(*), avg(value) FROM readings WHERE taken_at > now() - interval '400 days'
