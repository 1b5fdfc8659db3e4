package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Estimate says how many dead, never replayed messages filter matches
// (bulkreplay.Estimate: counted up to bulkreplay.MaxCounted, the
// planner's estimate above): the operator's question before StartJob. It
// changes and records nothing. Role: operator. Refusals: KindForbidden,
// KindInvalid (a filter field), KindUnavailable.
func (s *Service) Estimate(ctx context.Context, pool *pgxpool.Pool, a Actor, filter bulkreplay.Filter) (bulkreplay.Matches, error) {
	if err := requireRole(a, auth.Operator, ""); err != nil {
		return bulkreplay.Matches{}, err
	}
	if err := checkFilter(filter); err != nil {
		return bulkreplay.Matches{}, err
	}
	if pool == nil {
		return bulkreplay.Matches{}, noDatabase()
	}
	return bulkreplay.Estimate(ctx, pool, filter)
}

// JobStartInput asks for a bulk replay job.
type JobStartInput struct {
	Filter bulkreplay.Filter
	// All must be set for an empty Filter, which selects every dead
	// message: an empty filter is too easy to send by mistake.
	All  bool
	Mode outbox.ReplayMode
	// Reason: required to re-apply.
	Reason string
	// RatePerSecond: 1 to bulkreplay.MaxRatePerSecond; 0 for the default.
	RatePerSecond int
	RequestID     uuid.UUID
}

// StartJob starts a bulk replay job, whose estimate is counted here, in
// its transaction (never taken from the client). Role: operator.
// Refusals: KindForbidden, KindInvalid (filter, all, mode, reason, rate),
// KindConflict (a job for this filter is already running: the message
// names it).
func (s *Service) StartJob(ctx context.Context, pool *pgxpool.Pool, a Actor, in JobStartInput) (bulkreplay.Job, error) {
	if err := CheckJobStart(a, in); err != nil {
		return bulkreplay.Job{}, err
	}
	var job bulkreplay.Job
	err := s.run(ctx, pool, a, audit.Entry{Action: AuditJobStart, Reason: in.Reason, RequestID: in.RequestID.String()},
		func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
			estimate, err := bulkreplay.Estimate(ctx, tx, in.Filter)
			if err != nil {
				return false, err
			}
			job, err = bulkreplay.Start(ctx, tx, bulkreplay.Spec{Filter: in.Filter, Mode: in.Mode, Actor: a.Name,
				Reason: in.Reason, RatePerSecond: in.RatePerSecond, Estimate: estimate.N})
			if errors.Is(err, bulkreplay.ErrAlreadyRunning) {
				return false, conflict("A bulk replay job for this filter is already running (" + job.ID.String() + "): cancel it or wait for it to finish.")
			}
			if err != nil {
				return false, engineRefusal(err)
			}
			e.Target = jobTarget(job.ID)
			e.Detail, err = json.Marshal(map[string]any{"filter": json.RawMessage(job.Filter), "mode": job.Mode,
				"rate_per_second": job.RatePerSec, "estimate": job.Estimate})
			return true, err
		})
	if err != nil {
		return bulkreplay.Job{}, err
	}
	return job, nil
}

// CheckJobStart checks what StartJob checks before the database (role,
// filter, all, mode, reason, rate): a caller may ask before it shows the
// estimate and the confirm button. It returns nil or a *Refusal.
func CheckJobStart(a Actor, in JobStartInput) error {
	if err := requireRole(a, auth.Operator, ""); err != nil {
		return err
	}
	if err := checkFilter(in.Filter); err != nil {
		return err
	}
	if in.Filter == (bulkreplay.Filter{}) && !in.All {
		return invalid("all", `The filter is empty and would replay every dead message: narrow it, or confirm "all".`)
	}
	if err := checkModeReason(in.Mode, in.Reason); err != nil {
		return err
	}
	if in.RatePerSecond < 0 || in.RatePerSecond > bulkreplay.MaxRatePerSecond {
		return engineRefusal(bulkreplay.ErrInvalidRate)
	}
	return nil
}

// JobCancelInput names the job to cancel.
type JobCancelInput struct {
	JobID     uuid.UUID
	RequestID uuid.UUID
	// Reason is optional.
	Reason string
}

// CancelJob stops a running job; what it replayed stays replayed. Role:
// operator. Refusals: KindForbidden, KindInvalid (reason), KindConflict
// (the job is not running, or does not exist).
func (s *Service) CancelJob(ctx context.Context, pool *pgxpool.Pool, a Actor, in JobCancelInput) error {
	if err := requireRole(a, auth.Operator, ""); err != nil {
		return err
	}
	if err := CheckText("reason", in.Reason, MaxReasonChars); err != nil {
		return err
	}
	err := s.run(ctx, pool, a, audit.Entry{Action: AuditJobCancel, Target: jobTarget(in.JobID), Reason: in.Reason, RequestID: in.RequestID.String()},
		func(ctx context.Context, tx pgx.Tx, _ *audit.Entry) (bool, error) {
			running, err := bulkreplay.Cancel(ctx, tx, in.JobID)
			if err != nil {
				return false, err
			}
			if !running {
				return false, conflict("This job is not running: it finished or was cancelled already.")
			}
			return true, nil
		})
	return err
}

func jobTarget(id uuid.UUID) string { return fmt.Sprintf("replay job %s", id) }
