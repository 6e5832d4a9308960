package scenario

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyWriters is how many sessions write at once: the queue behind the
// notification lock grows with them, and twelve on two cores leave
// most of them waiting at any moment.
const notifyWriters = 12

// notifyCommits is an order service that tells its listeners about each
// order in the order's own transaction (NOTIFY order_events), from many
// writers at once, with one listener reading the channel: every commit
// queues on the notification queue's lock.
func notifyCommits(ctx context.Context, env *Env) error {
	go listen(ctx, env, "order_events")
	return untilDone(ctx, notifyWriters, func(ctx context.Context, conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer, total) VALUES ($1, $2) RETURNING id`, time.Now().Nanosecond()%1000, 42.5).Scan(&id); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT pg_notify('order_events', $1::bigint::text)`, id)
			return err
		})
	}, env)
}

// notifyOutbox is its quiet counterpart, the same service with the fix:
// each order's transaction writes an outbox row, and one notifier sends
// one NOTIFY per batch of committed rows every 20 ms.
func notifyOutbox(ctx context.Context, env *Env) error {
	go listen(ctx, env, "order_events")
	go func() {
		conn, err := pgx.Connect(ctx, env.AppDSN())
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			conn.Exec(ctx, `WITH sent AS (DELETE FROM order_outbox RETURNING channel)
				SELECT pg_notify(channel, count(*)::text) FROM sent GROUP BY channel`)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return untilDone(ctx, notifyWriters, func(ctx context.Context, conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer, total) VALUES ($1, $2) RETURNING id`, time.Now().Nanosecond()%1000, 42.5).Scan(&id); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO order_outbox (channel, payload) VALUES ('order_events', $1::bigint::text)`, id)
			return err
		})
	}, env)
}

// listen is the service's listener: it reads the channel's notifications
// until ctx ends, so the queue is drained as a real consumer would.
func listen(ctx context.Context, env *Env, channel string) {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return
	}
	for ctx.Err() == nil {
		conn.WaitForNotification(ctx)
	}
}
