package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// deliverySource walks the messages delivered to one destination since
// the cycle's window start, by message id; each is looked up by the
// idempotency key it was delivered with. A redelivery carries its
// original's key, so a key may come twice: the cycle keeps one.
type deliverySource struct {
	pool        *pgxpool.Pool
	destination string
}

func (s deliverySource) Bounds(ctx context.Context, since time.Time) (*string, int64, error) {
	b, err := queries.New(s.pool).ReconcileDeliveryBoundsGet(ctx, queries.ReconcileDeliveryBoundsGetParams{Destination: s.destination, Since: &since})
	if err != nil {
		return nil, 0, fmt.Errorf("reconcile: delivery bounds of %s: %w", s.destination, err)
	}
	if b.Estimate == 0 {
		return nil, 0, nil
	}
	upper := strconv.FormatInt(b.Upper, 10)
	return &upper, b.Estimate, nil
}

func (s deliverySource) Page(ctx context.Context, since time.Time, after *string, upper string, limit int) ([]Item, error) {
	var from int64
	if after != nil {
		var err error
		if from, err = strconv.ParseInt(*after, 10, 64); err != nil {
			return nil, fmt.Errorf("reconcile: delivery cursor %q: %w", *after, err)
		}
	}
	to, err := strconv.ParseInt(upper, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("reconcile: delivery upper bound %q: %w", upper, err)
	}
	rows, err := queries.New(s.pool).ReconcileDeliveryListPage(ctx, queries.ReconcileDeliveryListPageParams{
		Destination: s.destination, Since: &since, After: from, Upper: to, BatchSize: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: delivery page of %s: %w", s.destination, err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = Item{Cursor: strconv.FormatInt(r.ID, 10), Key: r.Key.String(), Ref: r.ID}
	}
	return items, nil
}
