package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// Operator actions on findings. Each has the shape of the transport-free
// operator actions (ctx, pool, actor, input) -> result or a typed
// refusal, owns its one transaction (effect, history row, change-feed row,
// audit row: invariant 7) and wakes the feed after the commit, so that the
// console, a JSON API or a triage WebSocket can all call it.

// Audit actions of the findings.
const (
	ActionRepair = "reconcile.repair"
	ActionIgnore = "reconcile.ignore"
)

// Refusals of the finding actions; nothing was written.
var (
	ErrForbidden         = errors.New("reconcile: repairing or ignoring a finding needs the operator role")
	ErrReasonRequired    = errors.New("reconcile: a repair or an ignore needs a reason")
	ErrFindingNotFound   = errors.New("reconcile: no such finding")
	ErrNotRepairable     = errors.New("reconcile: this finding cannot be repaired")
	ErrRepairInFlight    = errors.New("reconcile: a redelivery of this message is still in flight")
	ErrAlreadyResolved   = errors.New("reconcile: this finding is resolved or ignored")
	errUnknownRepairKind = errors.New("reconcile: no repair for this kind of finding")
)

// Actor is who acts: the signed-in account (or "cli") and its role.
type Actor struct {
	Name       string
	ID         *int64
	Role       auth.Role
	RemoteAddr string
}

// RepairInput asks for the repair of one finding.
type RepairInput struct {
	FindingID int64
	Reason    string
}

// RepairResult is the outbox row a repair created, or had created.
type RepairResult struct {
	FindingID int64
	// MessageID is the outbox row (switchyard.outbox.id).
	MessageID int64
	// Key is the idempotency key the repair is delivered with.
	Key uuid.UUID
	// Existing is true when this finding had already been repaired for
	// the cycle that last saw it: nothing new was written.
	Existing bool
}

// repairNamespace derives repair idempotency keys (UUID v5).
var repairNamespace = uuid.MustParse("5c1e8d2a-6f0b-4f7e-9a51-0d3b7c2e4a91")

// RepairKey is the idempotency key of the repair of finding as last seen
// by cycle: two clicks, two operators or a retried bulk repair of the same
// finding and cycle derive the same key, hence one outbox row.
func RepairKey(finding, cycle int64) uuid.UUID {
	return uuid.NewSHA1(repairNamespace, []byte("reconcile-repair/"+strconv.FormatInt(finding, 10)+"/"+strconv.FormatInt(cycle, 10)))
}

// Repair enqueues the repair of a finding through the outbox and marks it
// repair_requested: a delivery check's missing_remote is redelivered with
// its original idempotency key; a table check's missing_remote or
// mismatch enqueues the row's current state to the check's destination,
// and its missing_local a deletion. The finding is locked for the
// duration, so concurrent repairs of it are applied one at a time.
func Repair(ctx context.Context, pool *pgxpool.Pool, a Actor, in RepairInput) (RepairResult, error) {
	if err := allowed(a, in.Reason); err != nil {
		return RepairResult{}, err
	}
	var res RepairResult
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		f, err := lockFinding(ctx, tx, in.FindingID)
		if err != nil {
			return err
		}
		res = RepairResult{FindingID: f.ID}
		if f.Status == StatusResolved || f.Status == StatusIgnored {
			return fmt.Errorf("%w (it is %s)", ErrAlreadyResolved, f.Status)
		}
		if f.Status == StatusRepairRequested && f.RepairCycleID != nil && *f.RepairCycleID == f.LastCycleID && f.RepairMessage != nil {
			res.MessageID, res.Existing = *f.RepairMessage, true
			res.Key, err = deliveryKey(ctx, tx, res.MessageID)
			return err
		}
		if res.MessageID, res.Key, err = enqueueRepair(ctx, tx, a, in.Reason, f); err != nil {
			return err
		}
		return markFinding(ctx, tx, a, f, StatusRepairRequested, in.Reason, &f.LastCycleID, &res.MessageID, map[string]any{
			"check": f.CheckName, "key": f.Key, "kind": f.Kind, "message": res.MessageID, "idempotency_key": res.Key.String(),
		}, ActionRepair, RepairKey(f.ID, f.LastCycleID).String())
	})
	if err != nil {
		return RepairResult{}, err
	}
	if !res.Existing {
		_ = changefeed.Notify(ctx, pool) // wake-ups only: pages and dispatchers poll as well
		_ = outbox.Notify(ctx, pool)
	}
	return res, nil
}

// IgnoreInput asks to ignore a finding (it is known and accepted).
type IgnoreInput struct {
	FindingID int64
	Reason    string
}

// Ignore marks an open or repair_requested finding ignored: later cycles
// still see it, but it is no longer open drift.
func Ignore(ctx context.Context, pool *pgxpool.Pool, a Actor, in IgnoreInput) error {
	if err := allowed(a, in.Reason); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		f, err := lockFinding(ctx, tx, in.FindingID)
		if err != nil {
			return err
		}
		if f.Status == StatusResolved || f.Status == StatusIgnored {
			return fmt.Errorf("%w (it is %s)", ErrAlreadyResolved, f.Status)
		}
		return markFinding(ctx, tx, a, f, StatusIgnored, in.Reason, nil, nil,
			map[string]any{"check": f.CheckName, "key": f.Key, "kind": f.Kind}, ActionIgnore, "")
	})
	if err == nil {
		_ = changefeed.Notify(ctx, pool) // a wake-up only
	}
	return err
}

func allowed(a Actor, reason string) error {
	if !a.Role.Allows(auth.Operator) {
		return ErrForbidden
	}
	if strings.TrimSpace(reason) == "" {
		return ErrReasonRequired
	}
	return nil
}

func lockFinding(ctx context.Context, tx pgx.Tx, id int64) (queries.ReconcileFindingLockRow, error) {
	f, err := queries.New(tx).ReconcileFindingLock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("%w: %d", ErrFindingNotFound, id)
	}
	return f, wrap(err, "lock finding %d", id)
}

// markFinding moves f to status with its history, change-feed and audit
// rows, in tx.
func markFinding(ctx context.Context, tx pgx.Tx, a Actor, f queries.ReconcileFindingLockRow, status, reason string,
	cycle, message *int64, detail map[string]any, action, requestID string) error {
	q := queries.New(tx)
	err := q.ReconcileFindingMark(ctx, queries.ReconcileFindingMarkParams{
		FindingID: f.ID, Status: status, Actor: a.Name, Reason: reason, RepairCycleID: cycle, RepairMessage: message,
	})
	if err != nil {
		return fmt.Errorf("reconcile: mark finding %d %s: %w", f.ID, status, err)
	}
	if err := announce(ctx, tx, changefeed.KindReconcileFinding, f.CheckName, map[string]any{"finding": f.ID, "action": status}); err != nil {
		return err
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("reconcile: encode audit detail: %w", err)
	}
	_, err = audit.Record(ctx, tx, audit.Entry{
		Actor: a.Name, ActorID: a.ID, Action: action, Target: "finding " + strconv.FormatInt(f.ID, 10),
		Reason: reason, Outcome: audit.OK, RequestID: requestID, RemoteAddr: a.RemoteAddr, Detail: raw,
	})
	return err
}

// enqueueRepair writes the repair's outbox row for f, in tx.
func enqueueRepair(ctx context.Context, tx pgx.Tx, a Actor, reason string, f queries.ReconcileFindingLockRow) (int64, uuid.UUID, error) {
	key := RepairKey(f.ID, f.LastCycleID)
	switch {
	case f.CheckKind == KindDelivery && f.Kind == MissingRemote && f.Ref != nil:
		return redeliver(ctx, tx, a, reason, *f.Ref, key)
	case f.CheckKind == KindTable:
		return enqueueEntity(ctx, tx, f, key)
	default:
		return 0, uuid.Nil, fmt.Errorf("%w: %s of a %s check: %w", ErrNotRepairable, f.Kind, f.CheckKind, errUnknownRepairKind)
	}
}

// sqlstateUniqueViolation: the outbox allows one pending replay per
// message (outbox_one_pending_replay).
const sqlstateUniqueViolation = "23505"

func redeliver(ctx context.Context, tx pgx.Tx, a Actor, reason string, messageID int64, request uuid.UUID) (int64, uuid.UUID, error) {
	q := queries.New(tx)
	row, err := q.ReconcileRedeliver(ctx, queries.ReconcileRedeliverParams{ID: messageID, RequestID: request, Actor: a.Name, Reason: reason})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return row.ID, uuid.UUID(row.DeliveryKey.Bytes), nil
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateUniqueViolation:
		return 0, uuid.Nil, ErrRepairInFlight
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, uuid.Nil, fmt.Errorf("reconcile: redeliver message %d: %w", messageID, err)
	}
	prev, err := q.ReconcileReplayByRequest(ctx, request)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, uuid.Nil, fmt.Errorf("%w: message %d is gone or no longer delivered", ErrNotRepairable, messageID)
	}
	if err != nil {
		return 0, uuid.Nil, fmt.Errorf("reconcile: find the redelivery of message %d: %w", messageID, err)
	}
	return prev.ID, prev.DeliveryKey, nil
}

// enqueueEntity enqueues a table finding's repair: the row's current
// state, or its deletion when we do not have it.
func enqueueEntity(ctx context.Context, tx pgx.Tx, f queries.ReconcileFindingLockRow, key uuid.UUID) (int64, uuid.UUID, error) {
	payload := map[string]any{"key": f.Key, "deleted": true}
	if f.Kind != MissingLocal {
		src, err := NewTableSource(nil, f.TableSchema, f.TableName, f.KeyColumn, f.Columns)
		if err != nil {
			return 0, uuid.Nil, err
		}
		fields, found, err := src.Current(ctx, tx, f.Key)
		if err != nil {
			return 0, uuid.Nil, err
		}
		if !found {
			return 0, uuid.Nil, fmt.Errorf("%w: row %s is gone; the next cycle will show what is left", ErrNotRepairable, f.Key)
		}
		payload = map[string]any{"key": f.Key, "fields": json.RawMessage(fields)}
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return 0, uuid.Nil, fmt.Errorf("reconcile: encode repair: %w", err)
	}
	topic := f.Topic
	if topic == "" {
		topic = "reconcile." + f.CheckName
	}
	if _, err := outbox.Enqueue(ctx, tx, outbox.Message{
		ID: key, Topic: topic, Destination: f.Destination, AggregateType: f.TableName, AggregateID: f.Key, Payload: raw,
	}); err != nil {
		return 0, uuid.Nil, fmt.Errorf("reconcile: enqueue the repair of finding %d: %w", f.ID, err)
	}
	id, err := queries.New(tx).ConsoleMessageIDByMessageID(ctx, key)
	if err != nil {
		return 0, uuid.Nil, fmt.Errorf("reconcile: find the repair of finding %d: %w", f.ID, err)
	}
	return id, key, nil
}

// deliveryKey is the idempotency key outbox row id is delivered with.
func deliveryKey(ctx context.Context, tx pgx.Tx, id int64) (uuid.UUID, error) {
	m, err := queries.New(tx).ConsoleMessageGet(ctx, id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("reconcile: repair message %d: %w", id, err)
	}
	if m.DeliveryKey.Valid {
		return uuid.UUID(m.DeliveryKey.Bytes), nil
	}
	return m.MessageID, nil
}
