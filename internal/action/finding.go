package action

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/reconcile"
)

// FindingInput names a reconciliation finding to repair or ignore.
type FindingInput struct {
	FindingID int64
	// Reason is required: a repair writes to another system, an ignore
	// hides drift.
	Reason string
}

// RepairFinding repairs a finding through the outbox (reconcile.RepairTx):
// a redelivery, or the entity's current state, keyed by the finding and the
// cycle that last saw it, so two clicks, two operators or a retried bulk
// repair make one outbox row. A finding already repaired for that cycle is
// answered with its row (Existing): nothing new, nothing recorded. Role:
// operator. Refusals: KindForbidden, KindInvalid (reason), KindNotFound,
// KindConflict (resolved or ignored, not repairable, a redelivery in
// flight).
func (s *Service) RepairFinding(ctx context.Context, pool *pgxpool.Pool, a Actor, in FindingInput) (reconcile.RepairResult, error) {
	if err := checkFindingInput(a, in.Reason); err != nil {
		return reconcile.RepairResult{}, err
	}
	var res reconcile.RepairResult
	err := s.run(ctx, pool, a, audit.Entry{Action: reconcile.ActionRepair, Target: findingTarget(in.FindingID), Reason: in.Reason},
		func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
			var err error
			res, err = reconcile.RepairTx(ctx, tx, reconcile.By{Actor: a.Name, Reason: in.Reason}, in.FindingID)
			if err != nil || res.Existing {
				return false, findingRefusal(err)
			}
			e.RequestID = res.Request.String()
			e.Detail, err = json.Marshal(map[string]any{"check": res.Check, "key": res.FindingKey, "kind": res.Kind,
				"message": res.MessageID, "idempotency_key": res.Key.String()})
			return true, err
		})
	if err != nil {
		return reconcile.RepairResult{}, err
	}
	return res, nil
}

// IgnoreFinding marks a finding ignored: known and accepted, no longer
// open drift. Role: operator. Refusals: KindForbidden, KindInvalid
// (reason), KindNotFound, KindConflict (resolved or ignored already).
func (s *Service) IgnoreFinding(ctx context.Context, pool *pgxpool.Pool, a Actor, in FindingInput) error {
	if err := checkFindingInput(a, in.Reason); err != nil {
		return err
	}
	return s.run(ctx, pool, a, audit.Entry{Action: reconcile.ActionIgnore, Target: findingTarget(in.FindingID), Reason: in.Reason},
		func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
			ref, err := reconcile.IgnoreTx(ctx, tx, reconcile.By{Actor: a.Name, Reason: in.Reason}, in.FindingID)
			if err != nil {
				return false, findingRefusal(err)
			}
			e.Detail, err = json.Marshal(map[string]any{"check": ref.Check, "key": ref.FindingKey, "kind": ref.Kind})
			return true, err
		})
}

// checkFindingInput checks what the finding actions check before the
// database: the operator role and a reason.
func checkFindingInput(a Actor, reason string) error {
	if err := requireRole(a, auth.Operator, "Repairing or ignoring a finding needs the operator role."); err != nil {
		return err
	}
	if err := CheckText("reason", reason, MaxReasonChars); err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return invalid("reason", "A repair or an ignore needs a reason.")
	}
	return nil
}

// findingRefusal maps the refusals of reconcile to a Refusal, with the
// engine's sentence (which says which finding and why); any other error is
// returned as it is.
func findingRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reconcile.ErrFindingNotFound):
		return &Refusal{Kind: KindNotFound, Message: "No such finding."}
	case errors.Is(err, reconcile.ErrAlreadyResolved), errors.Is(err, reconcile.ErrNotRepairable),
		errors.Is(err, reconcile.ErrRepairInFlight):
		return conflict(sentence(err))
	}
	return err
}

// sentence is an engine error's text as a sentence: without the package
// prefix, capitalised, with a full stop.
func sentence(err error) string {
	s := strings.TrimPrefix(err.Error(), "reconcile: ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func findingTarget(id int64) string { return "finding " + strconv.FormatInt(id, 10) }
