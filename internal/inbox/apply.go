package inbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/fingerprint"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/pgtext"
	"github.com/switchyard/switchyard/internal/queries"
)

// duplicateSlots is how many rows a source's duplicate counter is spread
// over (switchyard.inbox_duplicates).
const duplicateSlots = 8

// handlerError marks an error as the handler's, as opposed to the
// database's: only the handler's failures are recorded against the event.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// receiveTx is Receive's transaction: the claim, then (for a new event)
// the handler, committed together; any error rolls everything back.
func receiveTx(ctx context.Context, pool *pgxpool.Pool, ev Event, headers []byte, h Handler) (Result, error) {
	tx, claim, err := beginWithClaim(ctx, pool, queries.InboxEventClaimParams{
		Source: ev.Source, EventID: ev.ID, Headers: headers, Payload: ev.Payload,
		EntityKey: ev.EntityKey, EntityVersion: entityVersion(ev), Slot: slot(ev.ID),
	})
	// After a commit, Rollback only reports that the transaction is closed.
	defer func() { _ = tx.Rollback(ctx) }()
	var res Result
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		res, err = Result{Outcome: OutcomeDuplicate}, nil // counted by the claim
	case err != nil:
		return Result{}, fmt.Errorf("record event: %w", err)
	case ev.EntityKey == "":
		ev.row = claim.ID
		res = Result{Outcome: OutcomeProcessed}
		err = run(ctx, tx, ev, h)
	default:
		ev.row = claim.ID
		res, err = applyVersioned(ctx, tx, ev, claim.ID, h)
	}
	if err != nil {
		return Result{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// beginWithClaim begins Receive's transaction and claims the event in it,
// in one round trip: pgx.Batch.BeginTx sends the BEGIN in the claim's
// batch, where pgx.BeginFunc would spend a round trip of its own on it (a
// fifth of a new event's, and a measurable share of the receiver's CPU).
// The transaction is returned whatever happened; when the BEGIN failed it
// is already closed.
func beginWithClaim(ctx context.Context, pool *pgxpool.Pool, p queries.InboxEventClaimParams) (pgx.Tx, queries.InboxEventClaimRow, error) {
	db := &beginningDB{pool: pool}
	var claim queries.InboxEventClaimRow
	var err error
	queries.New(db).InboxEventClaim(ctx, []queries.InboxEventClaimParams{p}).QueryRow(func(_ int, row queries.InboxEventClaimRow, rowErr error) {
		claim, err = row, rowErr
	})
	if db.err != nil {
		return db.tx, claim, fmt.Errorf("begin: %w", db.err)
	}
	return db.tx, claim, err
}

// beginningDB is a queries.DBTX for one generated batch query: it sends the
// batch with a BEGIN in front (pgx.Batch.BeginTx), keeps the transaction
// that begins, and consumes the BEGIN's result, so the generated code reads
// its own. Only SendBatch is supported.
type beginningDB struct {
	pool *pgxpool.Pool
	tx   pgx.Tx
	err  error // the BEGIN's
}

var errBatchOnly = errors.New("inbox: beginningDB sends one batch only")

func (d *beginningDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	begun := &pgx.Batch{}
	begun.BeginTx(pgx.TxOptions{})
	begun.QueuedQueries = append(begun.QueuedQueries, b.QueuedQueries...)
	br := d.pool.SendBatch(ctx, begun)
	d.tx = br.Tx()
	_, d.err = br.Exec()
	return br
}

func (d *beginningDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errBatchOnly
}

func (d *beginningDB) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errBatchOnly
}

func (d *beginningDB) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{}
}

func (d *beginningDB) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errBatchOnly
}

type errRow struct{}

func (errRow) Scan(...any) error { return errBatchOnly }

// applyVersioned applies a claimed event that names an entity version, or
// settles it as stale or held: see the package documentation.
func applyVersioned(ctx context.Context, tx pgx.Tx, ev Event, id int64, h Handler) (Result, error) {
	q := queries.New(tx)
	applied, err := q.InboxEntityVersionLock(ctx, queries.InboxEntityVersionLockParams{Source: ev.Source, EntityKey: ev.EntityKey})
	if err != nil {
		return Result{}, fmt.Errorf("lock entity %q: %w", ev.EntityKey, err)
	}
	var settle Outcome
	switch {
	case ev.EntityVersion <= applied:
		settle = OutcomeStale
	case ev.EntityVersion > applied+1 && ev.Policy.OutOfOrder == OutOfOrderHold:
		settle = OutcomeHeld
	}
	if settle != "" {
		if err := q.InboxEventSettle(ctx, queries.InboxEventSettleParams{Status: string(settle), ID: id}); err != nil {
			return Result{}, fmt.Errorf("record event as %s: %w", settle, err)
		}
		return Result{Outcome: settle}, nil
	}
	if err := run(ctx, tx, ev, h); err != nil {
		return Result{}, err
	}
	if err := setVersion(ctx, q, ev.Source, ev.EntityKey, ev.EntityVersion); err != nil {
		return Result{}, err
	}
	res := Result{Outcome: OutcomeProcessed}
	if ev.Policy.OutOfOrder == OutOfOrderHold {
		res.Released, err = releaseHeld(ctx, tx, ev, h)
	}
	return res, err
}

// run calls the handler, turning its error or panic into a handlerError,
// then links the event to the outbox messages the handler enqueued in tx
// (outbox.Enqueue under the handler's context, as a Go handler does with
// switchyard.Enqueue), for the event's page. A handler that enqueued
// nothing costs no statement more (the built-in forward links its message
// in the statement that inserts it).
func run(ctx context.Context, tx pgx.Tx, ev Event, h Handler) error {
	hctx, enqueued := outbox.RecordEnqueued(ctx)
	if err := call(hctx, tx, ev, h); err != nil {
		return err
	}
	ids := enqueued.IDs()
	if ev.row == 0 || len(ids) == 0 {
		return nil
	}
	err := queries.New(tx).InboxEventMessageLink(ctx, queries.InboxEventMessageLinkParams{InboxEventID: ev.row, MessageIds: ids})
	if err != nil {
		return fmt.Errorf("link event %s to the %d messages its handler enqueued: %w", ev.ID, len(ids), err)
	}
	return nil
}

// call calls the handler, turning its error or panic into a handlerError.
func call(ctx context.Context, tx pgx.Tx, ev Event, h Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &handlerError{fmt.Errorf("handler panicked: %v", r)}
		}
	}()
	if err := h(ctx, tx, ev); err != nil {
		return &handlerError{err}
	}
	return nil
}

func setVersion(ctx context.Context, q *queries.Queries, source, key string, version int64) error {
	err := q.InboxEntityVersionSet(ctx, queries.InboxEntityVersionSetParams{Version: version, Source: source, EntityKey: key})
	if err != nil {
		return fmt.Errorf("set entity %q to version %d: %w", key, version, err)
	}
	return nil
}

// releaseHeld applies, in order, the held events that follow ev's version
// without a gap, each under a savepoint: a successor whose handler fails is
// rolled back alone and recorded as failed (a redelivery retries it), and
// the chain stops there. It returns how many it applied.
func releaseHeld(ctx context.Context, tx pgx.Tx, ev Event, h Handler) (int, error) {
	q := queries.New(tx)
	released := 0
	for version := ev.EntityVersion + 1; ; version++ {
		row, err := q.InboxEventGetNextHeld(ctx, queries.InboxEventGetNextHeldParams{Source: ev.Source, EntityKey: ev.EntityKey, Version: version})
		if errors.Is(err, pgx.ErrNoRows) {
			return released, nil
		}
		if err != nil {
			return released, fmt.Errorf("find held successor %d of %q: %w", version, ev.EntityKey, err)
		}
		next := ev
		next.ID, next.Payload, next.EntityVersion, next.row = row.EventID, row.Payload, version, row.ID
		next.Headers = nil
		ok, err := applyHeld(ctx, tx, next, row, h)
		if err != nil || !ok {
			return released, err
		}
		released++
	}
}

// applyHeld applies one held event under a savepoint. ok is false when its
// handler failed (and the failure was recorded).
func applyHeld(ctx context.Context, tx pgx.Tx, ev Event, row queries.InboxEventGetNextHeldRow, h Handler) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("savepoint for held event %s: %w", ev.ID, err)
	}
	if herr := run(ctx, sp, ev, h); herr != nil {
		if err := sp.Rollback(ctx); err != nil {
			return false, fmt.Errorf("roll back held event %s: %w", ev.ID, err)
		}
		_, err := queries.New(tx).InboxEventFail(ctx, failParams(ev, row.Headers, herr))
		if err != nil {
			return false, fmt.Errorf("record failure of held event %s: %w", ev.ID, err)
		}
		return false, nil
	}
	q := queries.New(sp)
	if err := q.InboxEventMarkProcessed(ctx, row.ID); err != nil {
		return false, fmt.Errorf("record held event %s as processed: %w", ev.ID, err)
	}
	if err := setVersion(ctx, q, ev.Source, ev.EntityKey, ev.EntityVersion); err != nil {
		return false, err
	}
	if err := sp.Commit(ctx); err != nil {
		return false, fmt.Errorf("release savepoint of held event %s: %w", ev.ID, err)
	}
	return true, nil
}

// recordFailure records a failed attempt in a transaction of its own, after
// the applying one rolled back.
func recordFailure(ctx context.Context, pool queries.DBTX, ev Event, headers []byte, failed *handlerError) (Result, error) {
	row, err := queries.New(pool).InboxEventFail(ctx, failParams(ev, headers, failed))
	if errors.Is(err, pgx.ErrNoRows) {
		// Another delivery applied or settled the event meanwhile: its
		// effect happened, once.
		return Result{Outcome: OutcomeDuplicate}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("inbox: record failure of %s/%s (%v): %w", ev.Source, ev.ID, failed, err)
	}
	res := Result{Outcome: Outcome(row.Status), Attempts: int(row.Attempts)}
	return res, fmt.Errorf("%w: %s/%s, attempt %d: %w", ErrHandler, ev.Source, ev.ID, row.Attempts, failed.err)
}

// failParams records failed; its text is cleaned (a NUL or invalid UTF-8
// in a handler's error would make the record itself fail, and the event
// would be answered 503 forever without an operator ever seeing it).
func failParams(ev Event, headers []byte, failed error) queries.InboxEventFailParams {
	text := pgtext.Clean(failed.Error(), MaxErrorBytes)
	fp := fingerprint.Of(text)
	return queries.InboxEventFailParams{
		Source: ev.Source, EventID: ev.ID, Headers: headers, Payload: ev.Payload,
		EntityKey: ev.EntityKey, EntityVersion: entityVersion(ev),
		MaxAttempts: attemptsAllowed(ev, failed), LastError: &text, ErrorFingerprint: &fp,
	}
}

// attemptsAllowed is the event's policy, or 1 (park it now) when the
// handler failed on the event's data: PostgreSQL refused a value it
// carries (SQLSTATE class 22, such as a NUL in text), which no retry of
// the same bytes can change. Parked, operators see it at once.
func attemptsAllowed(ev Event, failed error) int32 {
	var pgErr *pgconn.PgError
	if errors.As(failed, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return 1
	}
	return ev.Policy.maxAttempts()
}

func entityVersion(ev Event) *int64 {
	if ev.EntityKey == "" {
		return nil
	}
	v := ev.EntityVersion
	return &v
}

// slot picks the duplicate counter row for an event id.
func slot(id string) int16 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int16(h.Sum32() % duplicateSlots)
}
