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
	// Limit, when > 0, stops after that many findings (a request's
	// share; the next call goes on, skipping those repaired).
	Limit int
}

// RepairManyResult counts what RepairMany did.
type RepairManyResult struct {
	Repaired int // a new outbox row each
	Existing int // repaired before for the same cycle: nothing new
	Refused  int // not repairable (a row gone, a redelivery in flight)
	// More is true when Limit stopped it before the last finding.
	More bool
}

func (r RepairManyResult) done() int { return r.Repaired + r.Existing + r.Refused }

// RepairMany repairs every open finding matching in, one Repair (one
// transaction, one audit row) per finding. A retry after a crash skips the
// findings already repair_requested; two runs at once meet on the
// finding's lock, and the repair key, derived from the finding and its
// cycle, makes one outbox row per finding whatever the interleaving.
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
			CheckName: in.Check, Kind: in.Kind, Status: StatusOpen, BeforeID: before, RowLimit: repairPage,
		})
		if err != nil {
			return res, fmt.Errorf("reconcile: findings to repair: %w", err)
		}
		for _, f := range rows {
			if in.Limit > 0 && res.done() >= in.Limit {
				res.More = true
				return res, nil
			}
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
