package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// The engine of the operator actions on findings: RepairTx and IgnoreTx
// change a finding inside the caller's transaction (effect, history row,
// change-feed row). The actions themselves, with the role check, the
// reason, the audit row and the wake-ups after the commit, are
// internal/action's (RepairFinding, IgnoreFinding, RepairFindings), so the
// console, a JSON API and a triage WebSocket all call the same thing.

// Audit actions of the findings (recorded by internal/action).
const (
	ActionRepair = "reconcile.repair"
	ActionIgnore = "reconcile.ignore"
)

// Refusals of the finding actions; nothing was written.
var (
	ErrFindingNotFound   = errors.New("reconcile: no such finding")
	ErrNotRepairable     = errors.New("reconcile: this finding cannot be repaired")
	ErrRepairInFlight    = errors.New("reconcile: a redelivery of this message is still in flight")
	ErrAlreadyResolved   = errors.New("reconcile: this finding is resolved or ignored")
	errUnknownRepairKind = errors.New("reconcile: no repair for this kind of finding")
)

// By is who changes a finding and why, as its history row records them.
// The caller has checked the actor's role and the reason.
type By struct {
	Actor  string
	Reason string
}

// FindingRef names a finding an action changed: what its audit row says.
type FindingRef struct {
	FindingID int64
	Check     string
	// FindingKey is the entity's key (an order id, a message id).
	FindingKey string
	Kind       string
}

// RepairResult is the outbox row a repair created, or had created.
type RepairResult struct {
	FindingRef
	// MessageID is the outbox row (switchyard.outbox.id).
	MessageID int64
	// Key is the idempotency key the repair is delivered with.
	Key uuid.UUID
	// Request is RepairKey of the finding and the cycle it was repaired
	// for: the audit row's request id.
	Request uuid.UUID
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

// RepairTx enqueues the repair of finding id through the outbox and marks
// it repair_requested, in tx: a delivery check's missing_remote is
// redelivered with its original idempotency key; a table check's
// missing_remote or mismatch enqueues the row's current state to the
// check's destination, and its missing_local a deletion. The finding is
// locked until tx ends, so concurrent repairs of it are applied one at a
// time, and the second finds the first's row (Existing). Refusals:
// ErrFindingNotFound, ErrAlreadyResolved, ErrNotRepairable,
// ErrRepairInFlight; after one the caller rolls tx back.
func RepairTx(ctx context.Context, tx pgx.Tx, by By, id int64) (RepairResult, error) {
	f, err := lockFinding(ctx, tx, id)
	if err != nil {
		return RepairResult{}, err
	}
	res := RepairResult{FindingRef: refOf(f), Request: RepairKey(f.ID, f.LastCycleID)}
	if f.Status == StatusResolved || f.Status == StatusIgnored {
		return res, fmt.Errorf("%w (it is %s)", ErrAlreadyResolved, f.Status)
	}
	if f.Status == StatusRepairRequested && f.RepairCycleID != nil && *f.RepairCycleID == f.LastCycleID && f.RepairMessage != nil {
		res.MessageID, res.Existing = *f.RepairMessage, true
		res.Key, err = deliveryKey(ctx, tx, res.MessageID)
		return res, err
	}
	if res.MessageID, res.Key, err = enqueueRepair(ctx, tx, by, f); err != nil {
		return res, err
	}
	return res, markFinding(ctx, tx, by, f, StatusRepairRequested, &f.LastCycleID, &res.MessageID)
}

// IgnoreTx marks an open or repair_requested finding ignored, in tx: later
// cycles still see it, but it is no longer open drift. Refusals:
// ErrFindingNotFound, ErrAlreadyResolved.
func IgnoreTx(ctx context.Context, tx pgx.Tx, by By, id int64) (FindingRef, error) {
	f, err := lockFinding(ctx, tx, id)
	if err != nil {
		return FindingRef{}, err
	}
	if f.Status == StatusResolved || f.Status == StatusIgnored {
		return refOf(f), fmt.Errorf("%w (it is %s)", ErrAlreadyResolved, f.Status)
	}
	return refOf(f), markFinding(ctx, tx, by, f, StatusIgnored, nil, nil)
}

func refOf(f queries.ReconcileFindingLockRow) FindingRef {
	return FindingRef{FindingID: f.ID, Check: f.CheckName, FindingKey: f.Key, Kind: f.Kind}
}

func lockFinding(ctx context.Context, tx pgx.Tx, id int64) (queries.ReconcileFindingLockRow, error) {
	f, err := queries.New(tx).ReconcileFindingLock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("%w: %d", ErrFindingNotFound, id)
	}
	return f, wrap(err, "lock finding %d", id)
}

// markFinding moves f to status with its history and change-feed rows,
// in tx.
func markFinding(ctx context.Context, tx pgx.Tx, by By, f queries.ReconcileFindingLockRow, status string, cycle, message *int64) error {
	err := queries.New(tx).ReconcileFindingMark(ctx, queries.ReconcileFindingMarkParams{
		FindingID: f.ID, Status: status, Actor: by.Actor, Reason: by.Reason, RepairCycleID: cycle, RepairMessage: message,
	})
	if err != nil {
		return fmt.Errorf("reconcile: mark finding %d %s: %w", f.ID, status, err)
	}
	return announce(ctx, tx, changefeed.KindReconcileFinding, f.CheckName, map[string]any{"finding": f.ID, "action": status})
}

// enqueueRepair writes the repair's outbox row for f, in tx.
func enqueueRepair(ctx context.Context, tx pgx.Tx, by By, f queries.ReconcileFindingLockRow) (int64, uuid.UUID, error) {
	key := RepairKey(f.ID, f.LastCycleID)
	switch {
	case f.CheckKind == KindDelivery && f.Kind == MissingRemote && f.Ref != nil:
		return redeliver(ctx, tx, by, *f.Ref, key)
	case f.CheckKind == KindTable:
		return enqueueEntity(ctx, tx, f, key)
	default:
		return 0, uuid.Nil, fmt.Errorf("%w: %s of a %s check: %w", ErrNotRepairable, f.Kind, f.CheckKind, errUnknownRepairKind)
	}
}

// sqlstateUniqueViolation: the outbox allows one pending replay per
// message (outbox_one_pending_replay).
const sqlstateUniqueViolation = "23505"

func redeliver(ctx context.Context, tx pgx.Tx, by By, messageID int64, request uuid.UUID) (int64, uuid.UUID, error) {
	q := queries.New(tx)
	row, err := q.ReconcileRedeliver(ctx, queries.ReconcileRedeliverParams{ID: messageID, RequestID: request, Actor: by.Actor, Reason: by.Reason})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return row.ID, uuid.UUID(row.DeliveryKey.Bytes), nil
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateUniqueViolation:
		return 0, uuid.Nil, ErrRepairInFlight
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, uuid.Nil, fmt.Errorf("reconcile: redeliver message %d: %w", messageID, err)
	}
	prev, err := q.ReconcileReplayGetByRequest(ctx, request)
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
	id, err := queries.New(tx).ConsoleMessageIDGetByMessageID(ctx, key)
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
