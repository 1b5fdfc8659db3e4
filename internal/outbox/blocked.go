package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// BlockedAggregate is an aggregate held by a dead head: its later messages
// wait until an operator replays or discards the head.
type BlockedAggregate = queries.BlockedAggregateListForDestinationsRow

// BlockedAggregates lists up to limit blocked aggregates, longest blocked
// first, with how many messages wait behind each.
func BlockedAggregates(ctx context.Context, pool *pgxpool.Pool, limit int) ([]BlockedAggregate, error) {
	rows, err := queries.New(pool).BlockedAggregateListForDestinations(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("outbox: list blocked aggregates: %w", err)
	}
	return rows, nil
}
