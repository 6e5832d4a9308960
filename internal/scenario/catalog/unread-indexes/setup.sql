-- An append-mostly audit log. Its indexes were added one by one over the
-- years, for reports long gone: nothing reads them, every insert writes
-- them. audit_events_actor_idx leads audit_events_actor_action_idx. The
-- targets repeat: the workload's CREATE UNIQUE INDEX CONCURRENTLY on them
-- fails and leaves its index behind, invalid; a build it cancels leaves
-- another, invalid but ready.
CREATE TABLE audit_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, actor int NOT NULL, action text NOT NULL,
  target text NOT NULL, detail text NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE INDEX audit_events_actor_idx ON audit_events (actor);
CREATE INDEX audit_events_actor_action_idx ON audit_events (actor, action);
CREATE INDEX audit_events_at_idx ON audit_events (at);
CREATE INDEX audit_events_detail_idx ON audit_events (detail);
INSERT INTO audit_events (actor, action, target, detail) SELECT g % 500, 'act' || (g % 7), md5((g % 19000)::text), repeat(md5((g * 7)::text), 2) FROM generate_series(1, 20000) g;
ANALYZE audit_events;
