package scenario

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// exportLines is the export of n-plus-one and n-plus-one-batched: a
// transaction per 60 orders, reading their 300 lines either one call per
// line (batched false: the N+1 loop an ORM's lazy loading runs) or in one
// call with the keys as an array. It runs until check is done.
func exportLines(batched bool) Workload {
	return func(ctx context.Context, env *Env) error {
		conn, err := pgx.Connect(ctx, env.AppDSN())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		for first := 1; ctx.Err() == nil; first = first%19000 + 60 {
			if err := exportOnce(ctx, conn, first, batched); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("exporting orders %d-%d: %w", first, first+59, err)
			}
		}
		return nil
	}
}

func exportOnce(ctx context.Context, conn *pgx.Conn, first int, batched bool) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM order_lines WHERE order_id BETWEEN $1 AND $2`, first, first+59)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		if batched {
			rows, err := tx.Query(ctx, `SELECT id, sku, qty, price FROM order_lines WHERE id = ANY($1)`, ids)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}
		for _, id := range ids {
			var sku string
			var qty int32
			var price float64
			err := tx.QueryRow(ctx, `SELECT id, sku, qty, price::float8 FROM order_lines WHERE id = $1`, id).Scan(&id, &sku, &qty, &price)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return nil
	})
}
