package action

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/reconcile"
)

// repairPage is how many findings RepairFindings reads at a time.
const repairPage = 200

// RepairFindingsInput asks for the repair of every open finding of a
// check (and kind, if set).
type RepairFindingsInput struct {
	Filter reconcile.FindingFilter
	Reason string
	// Limit, when > 0, stops after that many findings (a request's
	// share; the next call goes on, skipping those repaired).
	Limit int
}

// RepairFindingsResult counts what RepairFindings did.
type RepairFindingsResult struct {
	Repaired int // a new outbox row each
	Existing int // repaired before for the same cycle: nothing new
	Refused  int // not repairable (a row gone, a redelivery in flight)
	// More is true when Limit stopped it before the last finding.
	More bool
}

func (r RepairFindingsResult) done() int { return r.Repaired + r.Existing + r.Refused }

// RepairFindings repairs every open finding matching in, one RepairFinding
// (one transaction, one audit row) per finding. A retry after a crash
// skips the findings already repair_requested; two runs at once meet on
// the finding's lock, and the repair key makes one outbox row per finding
// whatever the interleaving. A KindConflict or KindNotFound refusal of one
// finding is counted and the others go on; any other refusal or error
// stops it. Role: operator. Refusals: KindForbidden, KindInvalid (reason,
// check).
func (s *Service) RepairFindings(ctx context.Context, pool *pgxpool.Pool, a Actor, in RepairFindingsInput) (RepairFindingsResult, error) {
	var res RepairFindingsResult
	if err := checkFindingsInput(a, in.Filter, in.Reason); err != nil {
		return res, err
	}
	if pool == nil {
		return res, noDatabase()
	}
	var before int64
	for {
		ids, err := reconcile.OpenFindings(ctx, pool, in.Filter, before, repairPage)
		if err != nil {
			return res, err
		}
		for _, id := range ids {
			if in.Limit > 0 && res.done() >= in.Limit {
				res.More = true
				return res, nil
			}
			if err := res.count(s.RepairFinding(ctx, pool, a, FindingInput{FindingID: id, Reason: in.Reason})); err != nil {
				return res, err
			}
		}
		if len(ids) < repairPage {
			return res, nil
		}
		before = ids[len(ids)-1]
	}
}

// count counts one finding's outcome; it returns the error that stops a
// bulk repair, or nil.
func (r *RepairFindingsResult) count(done reconcile.RepairResult, err error) error {
	ref := AsRefusal(err)
	switch {
	case err == nil && done.Existing:
		r.Existing++
	case err == nil:
		r.Repaired++
	case ref != nil && (ref.Kind == KindConflict || ref.Kind == KindNotFound):
		r.Refused++
	default:
		return err
	}
	return nil
}

// checkFindingsInput checks a bulk repair's input before the database.
func checkFindingsInput(a Actor, f reconcile.FindingFilter, reason string) error {
	if err := checkFindingInput(a, reason); err != nil {
		return err
	}
	if err := CheckText("check", f.Check, MaxFilterChars); err != nil {
		return err
	}
	if f.Check == "" {
		return invalid("check", "Choose the check whose findings to repair.")
	}
	return CheckText("kind", f.Kind, MaxFilterChars)
}
