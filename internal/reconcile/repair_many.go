package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// repairPage is how many findings RepairMany reads at a time.
const repairPage = 200

// RepairManyInput asks for the repair of every open finding of a check
// (and kind, if set).
type RepairManyInput struct {
	Check  string
	Kind   string // "": every kind
	Reason string
}

// RepairManyResult counts what RepairMany did.
type RepairManyResult struct {
	Repaired int // a new outbox row each
	Existing int // repaired before for the same cycle: nothing new
	Refused  int // not repairable (a row gone, a redelivery in flight)
}

// RepairMany repairs every open or repair_requested finding matching in,
// one Repair (one transaction, one audit row) per finding. Because each
// repair's key derives from its finding and cycle, a RepairMany retried
// after a crash, or run twice at once, makes one outbox row per finding.
// A refusal of one finding is counted and the others go on; a role or
// reason refusal, or any other error, stops it.
func RepairMany(ctx context.Context, pool *pgxpool.Pool, a Actor, in RepairManyInput) (RepairManyResult, error) {
	var res RepairManyResult
	if err := allowed(a, in.Reason); err != nil {
		return res, err
	}
	before := int64(1<<63 - 1)
	for {
		rows, err := queries.New(pool).ReconcileFindingsPage(ctx, queries.ReconcileFindingsPageParams{
			CheckName: in.Check, Kind: in.Kind, Status: "active", BeforeID: before, RowLimit: repairPage,
		})
		if err != nil {
			return res, fmt.Errorf("reconcile: findings to repair: %w", err)
		}
		for _, f := range rows {
			r, err := Repair(ctx, pool, a, RepairInput{FindingID: f.ID, Reason: in.Reason})
			switch {
			case err == nil && r.Existing:
				res.Existing++
			case err == nil:
				res.Repaired++
			case errors.Is(err, ErrNotRepairable), errors.Is(err, ErrRepairInFlight), errors.Is(err, ErrAlreadyResolved):
				res.Refused++
			default:
				return res, err
			}
		}
		if len(rows) < repairPage {
			return res, nil
		}
		before = rows[len(rows)-1].ID
	}
}
