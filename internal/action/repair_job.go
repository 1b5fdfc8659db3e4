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
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
)

// AuditRepairJobStart is the audit action of a bulk repair job's start;
// each finding it repairs is audited as reconcile.ActionRepair, in the
// batch that repairs it. A cancel is AuditJobCancel, as for every job.
const AuditRepairJobStart = "reconcile.repair_job.start"

// DefaultRepairRate is a bulk repair's rate when none is asked for:
// findings repaired per second.
const DefaultRepairRate = 100

// RepairJobInput asks for a bulk repair of every open finding of a check
// (and kind) as a background job, on the bulk replay job machinery.
type RepairJobInput struct {
	Filter reconcile.FindingFilter
	Reason string
	// RatePerSecond: 1 to bulkreplay.MaxRatePerSecond; 0 for
	// DefaultRepairRate.
	RatePerSecond int
	RequestID     uuid.UUID
}

// EstimateRepair counts the open findings filter matches, up to
// bulkreplay.MaxEstimate: the question before StartRepairJob. It changes
// and records nothing. Role: operator. Refusals: KindForbidden,
// KindInvalid (check, kind), KindUnavailable.
func (s *Service) EstimateRepair(ctx context.Context, pool *pgxpool.Pool, a Actor, filter reconcile.FindingFilter) (int64, error) {
	if err := checkFindingsInput(a, filter, "-"); err != nil {
		return 0, err
	}
	if pool == nil {
		return 0, noDatabase()
	}
	return estimateRepair(ctx, pool, filter)
}

func estimateRepair(ctx context.Context, db queries.DBTX, f reconcile.FindingFilter) (int64, error) {
	n, err := queries.New(db).RepairJobEstimate(ctx, queries.RepairJobEstimateParams{CheckName: f.Check, Kind: f.Kind, Cap: bulkreplay.MaxEstimate})
	if err != nil {
		return 0, fmt.Errorf("estimate a bulk repair: %w", err)
	}
	return n, nil
}

// StartRepairJob starts a bulk repair job, whose estimate is counted in
// its transaction; a bulk replay Runner with RepairJobWorker works it,
// with progress on the change feed, and CancelJob stops it. Role:
// operator. Refusals: KindForbidden, KindInvalid (reason, check, kind,
// rate), KindConflict (a repair job for this filter is already running).
func (s *Service) StartRepairJob(ctx context.Context, pool *pgxpool.Pool, a Actor, in RepairJobInput) (bulkreplay.Job, error) {
	if err := checkFindingsInput(a, in.Filter, in.Reason); err != nil {
		return bulkreplay.Job{}, err
	}
	if in.RatePerSecond == 0 {
		in.RatePerSecond = DefaultRepairRate
	}
	if in.RatePerSecond < 0 || in.RatePerSecond > bulkreplay.MaxRatePerSecond {
		return bulkreplay.Job{}, engineRefusal(bulkreplay.ErrInvalidRate)
	}
	var job bulkreplay.Job
	err := s.run(ctx, pool, a, audit.Entry{Action: AuditRepairJobStart, Reason: in.Reason, RequestID: in.RequestID.String()},
		func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
			var err error
			if job, err = createRepairJob(ctx, tx, a, in); err != nil {
				return false, err
			}
			e.Target = jobTarget(job.ID)
			e.Detail, err = json.Marshal(map[string]any{"filter": json.RawMessage(job.Filter),
				"rate_per_second": job.RatePerSec, "estimate": job.Estimate})
			return true, err
		})
	if err != nil {
		return bulkreplay.Job{}, err
	}
	return job, nil
}

// createRepairJob counts and creates the job in tx.
func createRepairJob(ctx context.Context, tx pgx.Tx, a Actor, in RepairJobInput) (bulkreplay.Job, error) {
	estimate, err := estimateRepair(ctx, tx, in.Filter)
	if err != nil {
		return bulkreplay.Job{}, err
	}
	filter, err := json.Marshal(in.Filter)
	if err != nil {
		return bulkreplay.Job{}, fmt.Errorf("encode a repair filter: %w", err)
	}
	key := "repair:" + string(filter) // never a replay job's key, which is a JSON object
	q := queries.New(tx)
	job, err := q.RepairJobCreate(ctx, queries.RepairJobCreateParams{Filter: filter, FilterKey: key, Actor: a.Name,
		Reason: in.Reason, RatePerSec: int32(in.RatePerSecond), Estimate: estimate})
	if errors.Is(err, pgx.ErrNoRows) {
		running, err := q.ReplayJobGetRunning(ctx, key)
		if err != nil {
			return bulkreplay.Job{}, fmt.Errorf("find the running repair job: %w", err)
		}
		return bulkreplay.Job{}, conflict("A bulk repair of these findings is already running (" + running.ID.String() + "): cancel it or wait for it to finish.")
	}
	if err != nil {
		return bulkreplay.Job{}, fmt.Errorf("start a bulk repair: %w", err)
	}
	return job, nil
}

// RepairJobWorker is the bulkreplay.Worker of bulk repair jobs
// (bulkreplay.KindRepair): give it to the bulk replay Runner's
// Config.Workers. Each finding of a batch is repaired by
// reconcile.RepairTx and audited (reconcile.ActionRepair, as the job's
// actor) in the batch's transaction, each in a savepoint so that one
// refused finding leaves the others. A batch done again after a crash
// derives the same repair keys: one outbox row per finding.
func RepairJobWorker() bulkreplay.Worker { return repairWorker{} }

type repairWorker struct{}

func (repairWorker) Candidates(ctx context.Context, tx pgx.Tx, job bulkreplay.Job, size int) ([]int64, error) {
	var f reconcile.FindingFilter
	if err := json.Unmarshal(job.Filter, &f); err != nil {
		return nil, fmt.Errorf("decode a repair filter: %w", err)
	}
	return queries.New(tx).RepairJobListCandidates(ctx, queries.RepairJobListCandidatesParams{
		CheckName: f.Check, Kind: f.Kind, AfterID: job.CursorID, UpperID: job.UpperID, BatchSize: int32(size)})
}

func (repairWorker) Work(ctx context.Context, tx pgx.Tx, job bulkreplay.Job, ids []int64) (done, skipped int, err error) {
	by := reconcile.By{Actor: job.Actor, Reason: job.Reason}
	for _, id := range ids {
		var res reconcile.RepairResult
		err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			var err error
			if res, err = reconcile.RepairTx(ctx, sp, by, id); err != nil || res.Existing {
				return err
			}
			detail, err := json.Marshal(map[string]any{"check": res.Check, "key": res.FindingKey, "kind": res.Kind,
				"message": res.MessageID, "idempotency_key": res.Key.String(), "job": job.ID})
			if err != nil {
				return fmt.Errorf("encode the audit of finding %d: %w", id, err)
			}
			_, err = audit.Record(ctx, sp, audit.Entry{Actor: job.Actor, Action: reconcile.ActionRepair, Target: findingTarget(id),
				Reason: job.Reason, Outcome: audit.OK, RequestID: res.Request.String(), Detail: detail})
			return err
		})
		switch {
		case err == nil && !res.Existing:
			done++
		case err == nil, AsRefusal(findingRefusal(err)) != nil:
			skipped++ // repaired, resolved or refused meanwhile
		default:
			return 0, 0, fmt.Errorf("repair finding %d: %w", id, err)
		}
	}
	return done, skipped, nil
}
