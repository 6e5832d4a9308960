-- A helpdesk: tickets change status all day, each has SLA timers,
-- agents' presence is refreshed, and every view of a ticket is counted.
CREATE TABLE tickets (id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, subject text NOT NULL, updated_at timestamptz NOT NULL);
CREATE TABLE sla_timers (ticket_id int PRIMARY KEY, policy text NOT NULL, due_at timestamptz NOT NULL, note text NOT NULL);
CREATE TABLE agent_presence (session_id int PRIMARY KEY, agent_id int NOT NULL, state text NOT NULL, detail text NOT NULL, seen_at timestamptz NOT NULL);
CREATE TABLE ticket_views (ticket_id int PRIMARY KEY, views int NOT NULL, last_viewer text NOT NULL, last_at timestamptz NOT NULL);
INSERT INTO tickets SELECT g, g % 900, 'open', 'printer on floor ' || g || ' ' || repeat(md5(g::text), 4), now() FROM generate_series(1, 20000) g;
INSERT INTO sla_timers SELECT g, 'p' || g % 4, now() + interval '4 hours', repeat(md5(g::text), 5) FROM generate_series(1, 20000) g;
INSERT INTO agent_presence SELECT g, g % 300, 'online', repeat(md5(g::text), 5), now() FROM generate_series(1, 20000) g;
INSERT INTO ticket_views SELECT g, 0, repeat(md5(g::text), 5), now() FROM generate_series(1, 20000) g;
VACUUM ANALYZE tickets, sla_timers, agent_presence, ticket_views;
