-- pgbench's built-in scripts (tpcb-like, simple-update, select-only), with
-- the values pgbench would have substituted.
UPDATE pgbench_accounts SET abalance = abalance + -3277 WHERE aid = 40213;
SELECT abalance FROM pgbench_accounts WHERE aid = 40213;
UPDATE pgbench_tellers SET tbalance = tbalance + -3277 WHERE tid = 7;
UPDATE pgbench_branches SET bbalance = bbalance + -3277 WHERE bid = 1;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (7, 1, 40213, -3277, CURRENT_TIMESTAMP);
