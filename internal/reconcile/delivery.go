package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// deliverySource walks the messages delivered to one destination since
// the cycle's window start, by delivery time, then message id (the order
// of outbox_finished_id, from the window's start: by id, a page had to
// walk every delivery before the window or sort the whole window); each
// is looked up by the idempotency key it was delivered with. A
// redelivery carries its original's key, so a key may come twice: the
// cycle keeps one.
type deliverySource struct {
	pool        *pgxpool.Pool
	destination string
}

func (s deliverySource) Bounds(ctx context.Context, since time.Time) (*string, int64, error) {
	b, err := queries.New(s.pool).ReconcileDeliveryBoundsGet(ctx, queries.ReconcileDeliveryBoundsGetParams{Destination: s.destination, Since: since})
	if err != nil {
		return nil, 0, fmt.Errorf("reconcile: delivery bounds of %s: %w", s.destination, err)
	}
	if b.Estimate == 0 {
		return nil, 0, nil
	}
	upper := deliveryCursor(b.UpperFinishedAt, b.UpperID)
	return &upper, b.Estimate, nil
}

func (s deliverySource) Page(ctx context.Context, since time.Time, after *string, upper string, limit int) ([]Item, error) {
	// From the window's start: ids are positive.
	afterAt, afterID := since, int64(0)
	if after != nil {
		at, id, bare, err := parseDeliveryCursor(*after)
		if err != nil {
			return nil, err
		}
		if !bare { // a bare id walks the window from its start (legacyUpper)
			afterAt, afterID = at, id
		}
	}
	upperAt, upperID, bare, err := parseDeliveryCursor(upper)
	if err != nil {
		return nil, err
	}
	if bare {
		upperAt = legacyUpper
	}
	rows, err := queries.New(s.pool).ReconcileDeliveryListPage(ctx, queries.ReconcileDeliveryListPageParams{
		Destination: s.destination, Since: &since, AfterFinishedAt: afterAt, AfterID: afterID,
		UpperFinishedAt: upperAt, UpperID: upperID, BatchSize: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: delivery page of %s: %w", s.destination, err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = Item{Cursor: deliveryCursor(r.FinishedAt, r.ID), Key: r.Key.String(), Ref: r.ID}
	}
	return items, nil
}

// deliveryCursor is a delivery's place in the walk as a cycle stores it:
// its delivery time (to the microsecond, PostgreSQL's precision) and its
// message id, "2026-12-07T11:40:30.123456Z/42".
func deliveryCursor(at time.Time, id int64) string {
	return at.UTC().Format(time.RFC3339Nano) + "/" + strconv.FormatInt(id, 10)
}

// legacyUpper stands for the delivery time of an upper bound that a cycle
// begun before migration 00032 stored as a bare id (the walk was by id
// then): every delivery is below it, so that cycle ends where its
// deliveries do. Its bare cursor makes it walk its window again from the
// start, once: keys examined twice are counted twice, none is missed.
var legacyUpper = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// parseDeliveryCursor reads deliveryCursor's text, or a bare id (bare).
func parseDeliveryCursor(s string) (at time.Time, id int64, bare bool, err error) {
	stamp, digits, found := strings.Cut(s, "/")
	if !found {
		digits = s
	}
	if id, err = strconv.ParseInt(digits, 10, 64); err != nil {
		return time.Time{}, 0, false, fmt.Errorf("reconcile: delivery cursor %q: %w", s, err)
	}
	if !found {
		return time.Time{}, id, true, nil
	}
	if at, err = time.Parse(time.RFC3339Nano, stamp); err != nil {
		return time.Time{}, 0, false, fmt.Errorf("reconcile: delivery cursor %q: %w", s, err)
	}
	return at, id, false, nil
}
