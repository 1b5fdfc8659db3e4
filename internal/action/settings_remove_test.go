package action_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/outbox"
)

// TestRenameAndDeleteRefuseViewerAndOperator: only an admin renames or
// deletes; a refusal changes and records nothing.
func TestRenameAndDeleteRefuseViewerAndOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.svc.SourceSave(ctx, b.pool, b.admin, forwardInput("crm"))
	require.NoError(t, err)
	before := b.footprint(t)
	for _, a := range []action.Actor{b.viewer, b.operator} {
		requireRefused(t, b.svc.DestinationRename(ctx, b.pool, a, action.RenameInput{Name: "billing", NewName: "billing2"}), action.KindForbidden)
		_, err := b.svc.DestinationDelete(ctx, b.pool, a, action.DeleteInput{Name: "billing", Confirmed: true})
		requireRefused(t, err, action.KindForbidden)
		requireRefused(t, b.svc.SourceRename(ctx, b.pool, a, action.RenameInput{Name: "crm", NewName: "crm2"}), action.KindForbidden)
		_, err = b.svc.SourceDelete(ctx, b.pool, a, action.DeleteInput{Name: "crm", Confirmed: true})
		requireRefused(t, err, action.KindForbidden)
	}
	require.Equal(t, before, b.footprint(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'billing'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_sources WHERE name = 'crm'`))
}

// TestDestinationRenameOnlyBeforeAnyMessage: a destination no message
// names is renamed, audited, its forward sources following; one that any
// message names is refused with what to do instead, and so is a taken
// name.
func TestDestinationRenameOnlyBeforeAnyMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.svc.SourceSave(ctx, b.pool, b.admin, forwardInput("crm"))
	require.NoError(t, err)
	_, err = b.svc.DestinationSave(ctx, b.pool, b.admin, webhookInput("crm-service"))
	require.NoError(t, err)

	r := requireRefused(t, b.svc.DestinationRename(ctx, b.pool, b.admin, action.RenameInput{Name: "billing", NewName: "Bad Name"}), action.KindInvalid)
	require.Equal(t, "new_name", r.Field)
	r = requireRefused(t, b.svc.DestinationRename(ctx, b.pool, b.admin, action.RenameInput{Name: "billing", NewName: "crm-service"}), action.KindConflict)
	require.Equal(t, "new_name", r.Field)
	requireRefused(t, b.svc.DestinationRename(ctx, b.pool, b.admin, action.RenameInput{Name: "nowhere", NewName: "somewhere"}), action.KindNotFound)

	require.NoError(t, b.svc.DestinationRename(ctx, b.pool, b.admin, action.RenameInput{Name: "billing", NewName: "billing-v2"}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'billing-v2'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_sources WHERE name = 'crm' AND forward_to = 'billing-v2'`), "its forward source follows")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.rename' AND actor = 'ada'
		AND target = 'destination billing' AND detail->>'renamed_to' = 'billing-v2'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'config' AND subject IN ('destination/billing', 'destination/billing-v2')`))

	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at) VALUES ('t', 'billing-v2', '{}', 'delivered', now())`)
	require.NoError(t, err)
	before := b.footprint(t)
	r = requireRefused(t, b.svc.DestinationRename(ctx, b.pool, b.admin, action.RenameInput{Name: "billing-v2", NewName: "billing-v3"}), action.KindConflict)
	require.Contains(t, r.Message, "1 message name it")
	require.Contains(t, r.Message, "Add a destination named billing-v3")
	require.Equal(t, before, b.footprint(t))
}

// TestDestinationDeleteRefusesWhatIsLeftToDeliverOrDecide: pending and
// dead messages, and a forward source, each refuse the delete with what
// to do; without them the destination goes, with its delivered and
// discarded messages, audited.
func TestDestinationDeleteRefusesWhatIsLeftToDeliverOrDecide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing"})
	require.Equal(t, "confirm", requireRefused(t, err, action.KindInvalid).Field)

	pending := b.message(t, "pending")
	dead := b.message(t, "dead")
	b.message(t, "delivered")
	b.message(t, "discarded")
	_, err = b.svc.SourceSave(ctx, b.pool, b.admin, forwardInput("crm"))
	require.NoError(t, err)
	del := func() *action.Refusal {
		_, err := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
		return requireRefused(t, err, action.KindConflict)
	}
	require.Contains(t, del().Message, "still has 1 pending message to deliver")
	_, err = b.pool.Exec(ctx, `UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() WHERE id = $1`, pending)
	require.NoError(t, err)
	require.Contains(t, del().Message, "has 1 dead message")
	_, err = b.pool.Exec(ctx, `UPDATE switchyard.outbox SET state = 'discarded' WHERE id = $1`, dead)
	require.NoError(t, err)
	require.Contains(t, del().Message, "The inbox source crm forwards to destination billing")
	_, err = b.svc.SourceDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "crm", Confirmed: true})
	require.NoError(t, err)

	deleted, err := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
	require.NoError(t, err)
	require.EqualValues(t, 4, deleted.Settled)
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'billing'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.outbox`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.delete' AND target = 'destination billing'
		AND (detail->>'settled_messages_deleted')::int = 4`))
	_, err = b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
	requireRefused(t, err, action.KindNotFound)
}

// TestDestinationDeleteAgainstConcurrentEnqueues: services enqueue to a
// destination while an admin deletes it. Either the delete is refused
// (a message was pending) or it wins, and then every enqueue after it
// fails as an unknown destination: no message is ever left naming a
// destination that is gone, and none is lost silently.
func TestDestinationDeleteAgainstConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	enqueued := 0
	for range 8 {
		wg.Go(func() {
			<-start
			for range 5 {
				tx, err := b.pool.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = outbox.Enqueue(ctx, tx, outbox.Message{Topic: "t", Destination: "billing", Payload: []byte(`{}`)})
				if err == nil {
					err = tx.Commit(ctx)
				}
				_ = tx.Rollback(ctx)
				if err == nil {
					mu.Lock()
					enqueued++
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	_, delErr := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
	wg.Wait()
	messages := b.count(t, `SELECT count(*) FROM switchyard.outbox`)
	require.Equal(t, enqueued, messages, "every committed enqueue is a message")
	if delErr == nil {
		require.Zero(t, messages, "a delete that won found nothing to deliver, and nothing came after it")
		require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations`))
		return
	}
	require.Contains(t, requireRefused(t, delErr, action.KindConflict).Message, "pending message")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'billing'`))
}

// TestSourceRenameAndDelete: a source that recorded nothing is renamed;
// one with events is not; one with an event waiting for an operator is
// not deleted, and once none waits it is, its processed events kept.
func TestSourceRenameAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.svc.SourceSave(ctx, b.pool, b.admin, forwardInput("crm"))
	require.NoError(t, err)
	require.NoError(t, b.svc.SourceRename(ctx, b.pool, b.admin, action.RenameInput{Name: "crm", NewName: "crm-hooks"}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_sources WHERE name = 'crm-hooks'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox_source.rename' AND detail->>'renamed_to' = 'crm-hooks'`))

	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status) VALUES
		('crm-hooks', 'e1', '{}', 'processed'), ('crm-hooks', 'e2', '{}', 'parked')`)
	require.NoError(t, err)
	r := requireRefused(t, b.svc.SourceRename(ctx, b.pool, b.admin, action.RenameInput{Name: "crm-hooks", NewName: "crm"}), action.KindConflict)
	require.Contains(t, r.Message, "it has recorded 2 events")
	_, err = b.svc.SourceDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "crm-hooks", Confirmed: true})
	require.Contains(t, requireRefused(t, err, action.KindConflict).Message, "has 1 event waiting for an operator")

	_, err = b.pool.Exec(ctx, `UPDATE switchyard.inbox_events SET status = 'processed' WHERE event_id = 'e2'`)
	require.NoError(t, err)
	_, err = b.svc.SourceDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "crm-hooks", Confirmed: true})
	require.NoError(t, err)
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.inbox_sources`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.inbox_events WHERE source = 'crm-hooks'`), "the dedupe record stays")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox_source.delete' AND target = 'inbox source crm-hooks'`))
}

// TestDestinationDeleteWaitsForAnEnqueueInProgress: a message inserted
// but not committed yet, in READ COMMITTED or REPEATABLE READ, makes the
// delete wait until its transaction ends; the delete then counts it and is
// refused. No message is left naming a destination that is gone.
func TestDestinationDeleteWaitsForAnEnqueueInProgress(t *testing.T) {
	t.Parallel()
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead} {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'billing', '{}')`)
			require.NoError(t, err)

			deleted := make(chan error, 1)
			go func() {
				_, err := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
				deleted <- err
			}()
			waitForALockWait(t, b.pool, deleted, "the delete did not wait for the enqueue in progress")
			// A waiting delete does not hold up the other enqueues to its
			// destination: it tries the lock instead of queueing for it.
			other, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err = b.pool.Exec(other, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'billing', '{}')`)
			require.NoError(t, err, "an enqueue while the delete waits")
			require.NoError(t, tx.Commit(ctx))

			require.Contains(t, requireRefused(t, <-deleted, action.KindConflict).Message, "still has 2 pending messages")
			require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.outbox o JOIN switchyard.destinations d ON d.name = o.destination`))
		})
	}
}

// TestEnqueueHeldOffByADestinationDeleteIsRefused: an enqueue that starts
// while a delete of its destination is under way waits for the delete and,
// once it has committed, fails as the foreign key failed it (23503), in
// READ COMMITTED; in REPEATABLE READ, whose snapshot predates the delete,
// with a serialization failure (40001) that such a transaction retries.
func TestEnqueueHeldOffByADestinationDeleteIsRefused(t *testing.T) {
	t.Parallel()
	for iso, code := range map[pgx.TxIsoLevel]string{pgx.ReadCommitted: "23503", pgx.RepeatableRead: "40001"} {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			b.message(t, "delivered") // its aggregate row is what pauses the delete below
			_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.outbox_aggregates (destination, aggregate_type, aggregate_id, last_seq)
				VALUES ('billing', 'order', '1', 1)`)
			require.NoError(t, err)

			// The enqueue takes its snapshot before the delete starts.
			enqueue, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			require.NoError(t, err)
			defer func() { _ = enqueue.Rollback(ctx) }()
			require.Equal(t, 1, countIn(t, enqueue, `SELECT count(*) FROM switchyard.destinations`))

			// A row lock on the destination's aggregate stops the delete
			// at its last statement, after it has taken every lock of its own.
			pause, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = pause.Rollback(ctx) }()
			_, err = pause.Exec(ctx, `SELECT FROM switchyard.outbox_aggregates WHERE destination = 'billing' FOR UPDATE`)
			require.NoError(t, err)
			deleted := make(chan error, 1)
			go func() {
				_, err := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
				deleted <- err
			}()
			waitForALockWait(t, b.pool, deleted, "the delete was not paused")

			inserted := make(chan error, 1)
			go func() {
				_, err := enqueue.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'billing', '{}')`)
				inserted <- err
			}()
			waitForLockWaits(t, b.pool, 2, inserted, "the enqueue did not wait for the delete")
			require.NoError(t, pause.Rollback(ctx))
			require.NoError(t, <-deleted)

			var pgErr *pgconn.PgError
			require.ErrorAs(t, <-inserted, &pgErr)
			require.Equal(t, code, pgErr.Code, pgErr.Message)
			require.NoError(t, enqueue.Rollback(ctx))
			require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.outbox`))
			require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations`))
		})
	}
}

// TestDestinationDeleteRefusedWhileAnEnqueueLasts: an enqueue still open
// after the delete's 5 s wait makes it a conflict that says to try again;
// nothing is deleted.
func TestDestinationDeleteRefusedWhileAnEnqueueLasts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'billing', '{}')`)
	require.NoError(t, err)
	_, err = b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
	require.Contains(t, requireRefused(t, err, action.KindConflict).Message, "Destination billing is in use right now")
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'billing'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.delete'`))
}

// TestDestinationDeleteAgainstARestore: a discarded message restored (made
// dead again) while the destination is being deleted: the delete, which
// counted it as discarded, is refused, and the message keeps its
// destination.
func TestDestinationDeleteAgainstARestore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.message(t, "discarded")
	restore, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = restore.Rollback(ctx) }()
	_, err = restore.Exec(ctx, `UPDATE switchyard.outbox SET state = 'dead' WHERE id = $1`, id)
	require.NoError(t, err)

	deleted := make(chan error, 1)
	go func() {
		_, err := b.svc.DestinationDelete(ctx, b.pool, b.admin, action.DeleteInput{Name: "billing", Confirmed: true})
		deleted <- err
	}()
	// The delete counted the message as discarded and now waits for the
	// restore's row lock to delete it as settled.
	waitForALockWait(t, b.pool, deleted, "the delete did not wait for the restore")
	require.NoError(t, restore.Commit(ctx))
	require.Contains(t, requireRefused(t, <-deleted, action.KindConflict).Message, "got a message to deliver or decide while it was being deleted")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox o JOIN switchyard.destinations d ON d.name = o.destination WHERE o.state = 'dead'`))
}

func countIn(t *testing.T, tx pgx.Tx, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// waitForALockWait returns once a backend of the test's database waits
// for a lock; it fails with why when done reports first.
func waitForALockWait(t *testing.T, pool *pgxpool.Pool, done <-chan error, why string) {
	t.Helper()
	waitForLockWaits(t, pool, 1, done, why)
}

// waitForLockWaits returns once n backends of the test's database wait
// for a lock, blocked or retrying it (destination_lock_enqueues sleeps
// between tries); it fails with why when done reports first (the
// statement it runs returned without waiting) or after 30 s.
func waitForLockWaits(t *testing.T, pool *pgxpool.Pool, n int, done <-chan error, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND (wait_event_type = 'Lock' OR wait_event = 'PgSleep')`).Scan(&waiting))
		if waiting >= n {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("%s (it returned %v)", why, err)
		case <-ctx.Done():
			t.Fatalf("%s within 30 s", why)
		case <-tick.C:
		}
	}
}
