package reconcile

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/internal/queries"
)

// FindingFilter selects open findings for a bulk repair: those of a check,
// and of a kind if Kind is set.
type FindingFilter struct {
	Check string `json:"check"`
	Kind  string `json:"kind,omitempty"` // "": every kind
}

// OpenFindings is a page of at most limit open findings matching f, by
// descending id, below before (the last id of the previous page; 0 for the
// first). A bulk repair walks it to the end, one RepairTx per finding: a
// finding repaired meanwhile is no longer open and is skipped by a retry.
func OpenFindings(ctx context.Context, db queries.DBTX, f FindingFilter, before int64, limit int) ([]int64, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := queries.New(db).ReconcileFindingListPage(ctx, queries.ReconcileFindingListPageParams{
		CheckName: f.Check, Kind: f.Kind, Status: StatusOpen, BeforeID: before, RowLimit: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: findings to repair: %w", err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids, nil
}
