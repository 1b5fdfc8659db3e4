package inbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// linkSchema is a team's functions for 'sql' sources that enqueue by
// inserting into switchyard.outbox, each message marked with the event's
// id and where in the function it was inserted.
const linkSchema = `
INSERT INTO switchyard.destinations (name, kind, address) VALUES ('warehouse', 'webhook', 'http://127.0.0.1:1/');
CREATE SCHEMA team;
CREATE TABLE team.refusing (event_id text PRIMARY KEY);
CREATE FUNCTION team.enqueue(mark text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.paid', 'warehouse', json_build_object('mark', mark))
$$;
CREATE FUNCTION team.two(event jsonb, headers jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM team.refusing r WHERE r.event_id = event->>'id') THEN
        RAISE EXCEPTION 'refused %', event->>'id';
    END IF;
    PERFORM team.enqueue(event->>'id' || '/1');
    PERFORM team.enqueue(event->>'id' || '/2');
END
$$;
CREATE FUNCTION team.none(event jsonb, headers jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO team.refusing (event_id) SELECT 'never-' || (event->>'id') WHERE false
$$;
CREATE FUNCTION team.nested(event jsonb, headers jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM team.enqueue(event->>'id' || '/top');
    BEGIN
        PERFORM team.enqueue(event->>'id' || '/kept');
    EXCEPTION WHEN others THEN NULL;
    END;
    BEGIN
        PERFORM team.enqueue(event->>'id' || '/undone');
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN others THEN NULL;
    END;
    BEGIN
        BEGIN
            PERFORM team.enqueue(event->>'id' || '/deep');
        EXCEPTION WHEN others THEN NULL;
        END;
    EXCEPTION WHEN others THEN NULL;
    END;
END
$$;
-- waiting enqueues, then waits until the test lets go of advisory lock
-- 4242, then enqueues again.
CREATE FUNCTION team.waiting(event jsonb, headers jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM team.enqueue(event->>'id' || '/before');
    BEGIN
        PERFORM team.enqueue(event->>'id' || '/sub');
    EXCEPTION WHEN others THEN NULL;
    END;
    PERFORM pg_advisory_lock_shared(4242);
    PERFORM pg_advisory_unlock_shared(4242);
    PERFORM team.enqueue(event->>'id' || '/after');
END
$$;
INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function) VALUES
    ('two', 'standard-webhooks', '{S}', 'sql', 'team.two'),
    ('none', 'standard-webhooks', '{S}', 'sql', 'team.none'),
    ('nested', 'standard-webhooks', '{S}', 'sql', 'team.nested'),
    ('waiting', 'standard-webhooks', '{S}', 'sql', 'team.waiting');`

// linkSetup is a database with linkSchema and a receiver loaded from it.
func linkSetup(t *testing.T) (*pgxpool.Pool, *Receiver) {
	t.Helper()
	pool := setup(t)
	exec(t, pool, linkSchema)
	return pool, instances(t, pool, 1)[0]
}

// sendSigned delivers one signed event and requires its outcome.
func sendSigned(t *testing.T, r *Receiver, source, id string, want Outcome) {
	t.Helper()
	body := fmt.Appendf(nil, `{"id": %q}`, id)
	res, err := r.Accept(context.Background(), source, standardHeader(t, id, time.Now().Unix(), []string{builtinSecret}, body), body)
	if want == OutcomeProcessed {
		require.NoError(t, err)
	}
	require.Equal(t, want, res.Outcome)
}

// linkedMarks returns the marks of the messages linked to an event, and
// the marks of all outbox messages of that event, linked or not.
func linkedMarks(t *testing.T, pool *pgxpool.Pool, source, id string) (linked, all []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT o.payload->>'mark' FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id
		JOIN switchyard.outbox o ON o.id = m.outbox_id
		WHERE e.source = $1 AND e.event_id = $2 ORDER BY o.id`, source, id)
	require.NoError(t, err)
	linked, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	rows, err = pool.Query(ctx, `SELECT o.payload->>'mark' FROM switchyard.outbox o WHERE o.payload->>'mark' LIKE $1 || '/%' ORDER BY o.id`, id)
	require.NoError(t, err)
	all, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return linked, all
}

// A 'sql' source's function that inserts into switchyard.outbox has those
// messages linked to its event: both of two; none when it enqueues
// nothing; and those it enqueues in its EXCEPTION blocks (subtransactions)
// that it keeps, also nested, but not the one in a block it rolled back
// (that row is gone).
func TestSQLHandlerLinksTheMessagesItsFunctionEnqueued(t *testing.T) {
	t.Parallel()
	pool, r := linkSetup(t)
	for _, tc := range []struct {
		source string
		want   []string
	}{
		{source: "two", want: []string{"e/1", "e/2"}},
		{source: "none", want: []string{}},
		{source: "nested", want: []string{"e/top", "e/kept", "e/deep"}},
	} {
		sendSigned(t, r, tc.source, "e", OutcomeProcessed)
		linked, all := linkedMarks(t, pool, tc.source, "e")
		require.Equal(t, tc.want, linked, tc.source)
		if tc.source != "two" { // the marks are per event id, and "two" came first
			continue
		}
		require.Equal(t, tc.want, all, "every message of the event is linked")
	}
	require.Equal(t, 5, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages`))
	require.Equal(t, 5, count(t, pool, `SELECT count(*) FROM switchyard.outbox`), "the rolled-back one is gone")
}

// An operator's retry runs the handler under a savepoint, so the function's
// rows are a subtransaction's: they are linked all the same, to the
// retried event only.
func TestSQLHandlerRetryLinksTheMessagesItsFunctionEnqueued(t *testing.T) {
	t.Parallel()
	pool, r := linkSetup(t)
	exec(t, pool, `INSERT INTO team.refusing VALUES ('r')`)
	sendSigned(t, r, "two", "r", OutcomeFailed)
	sendSigned(t, r, "two", "ok", OutcomeProcessed)
	exec(t, pool, `DELETE FROM team.refusing`)

	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id FROM switchyard.inbox_events WHERE event_id = 'r'`).Scan(&id))
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		res, err := r.RetryTx(context.Background(), tx, id, Retry{Actor: "alice", RequestID: uuid.New()})
		require.Equal(t, OutcomeProcessed, res.Outcome)
		return err
	})
	require.NoError(t, err)
	linked, _ := linkedMarks(t, pool, "two", "r")
	require.Equal(t, []string{"r/1", "r/2"}, linked)
	linked, _ = linkedMarks(t, pool, "two", "ok")
	require.Equal(t, []string{"ok/1", "ok/2"}, linked)
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages`))
}

// Other transactions enqueue while a 'sql' function runs, between its
// messages: some commit before the function ends (their rows visible to
// the statement that links, their ids between the function's, their xids
// newer than the event's transaction, like its own subtransaction's),
// others are still open when it links and commit after. None of theirs
// is linked; all three of the function's are.
func TestSQLHandlerNeverLinksConcurrentTransactionsMessages(t *testing.T) {
	t.Parallel()
	pool, r := linkSetup(t)
	ctx := context.Background()
	const committers, openers = 24, 8
	cfg := pool.Config().Copy()
	cfg.MaxConns = committers + openers + 2 // the openers keep theirs
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	gate, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer gate.Release()
	_, err = gate.Exec(ctx, `SELECT pg_advisory_lock(4242)`)
	require.NoError(t, err)

	done := make(chan error, 1)
	body := []byte(`{"id": "w"}`)
	header := standardHeader(t, "w", time.Now().Unix(), []string{builtinSecret}, body)
	go func() {
		res, err := r.Accept(ctx, "waiting", header, body)
		if err == nil && res.Outcome != OutcomeProcessed {
			err = fmt.Errorf("outcome %s", res.Outcome)
		}
		done <- err
	}()
	testwait.Until(t, 10*time.Second, "the function to wait on the gate", func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted`) == 1
	})

	open := make([]pgx.Tx, openers)
	errs := make(chan error, committers+openers)
	testwait.Together(committers+openers, func(i int) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			errs <- err
			return
		}
		if _, err := tx.Exec(ctx, `SELECT team.enqueue($1)`, fmt.Sprintf("w/other-%d", i)); err != nil {
			errs <- err
			return
		}
		if i >= committers {
			open[i-committers] = tx // committed after the handler has linked
			return
		}
		errs <- tx.Commit(ctx)
	})
	for range committers {
		require.NoError(t, <-errs)
	}
	require.Empty(t, errs)

	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock(4242)`)
	require.NoError(t, err)
	require.NoError(t, testwait.For(t, 10*time.Second, "the event to be processed", done))
	for _, tx := range open {
		require.NoError(t, tx.Commit(ctx))
	}

	linked, all := linkedMarks(t, pool, "waiting", "w")
	require.Equal(t, []string{"w/before", "w/sub", "w/after"}, linked)
	require.Len(t, all, 3+committers+openers)
	require.Equal(t, committers+openers, count(t, pool, `SELECT count(*) FROM switchyard.outbox
		WHERE id > (SELECT id FROM switchyard.outbox WHERE payload->>'mark' = 'w/sub')
		  AND id < (SELECT id FROM switchyard.outbox WHERE payload->>'mark' = 'w/after')`),
		"the others' rows lie between the function's: only their transaction tells them apart")
}

// Many 'sql' events, each enqueueing two messages, received at once on
// two instances while other transactions keep enqueueing (some under a
// savepoint): each event is linked to its own two messages and nothing
// else.
func TestSQLHandlerLinksOnlyItsOwnUnderConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	pool, _ := linkSetup(t)
	receivers := instances(t, pool, 2)
	ctx := context.Background()

	stop := make(chan struct{})
	var noise sync.WaitGroup
	noiseErrs := make(chan error, 6)
	for i := range 6 {
		noise.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					noiseErrs <- nil
					return
				default:
				}
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if i%2 == 1 {
						return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
							_, err := sp.Exec(ctx, `SELECT team.enqueue($1)`, fmt.Sprintf("noise/%d/%d", i, n))
							return err
						})
					}
					_, err := tx.Exec(ctx, `SELECT team.enqueue($1)`, fmt.Sprintf("noise/%d/%d", i, n))
					return err
				})
				if err != nil {
					noiseErrs <- err
					return
				}
			}
		})
	}

	const events = 40
	start := make(chan struct{})
	var wg sync.WaitGroup
	outcomes := make(chan error, events)
	for i := range events {
		id := fmt.Sprintf("s%d", i)
		body := fmt.Appendf(nil, `{"id": %q}`, id)
		header := standardHeader(t, id, time.Now().Unix(), []string{builtinSecret}, body)
		wg.Go(func() {
			<-start
			res, err := receivers[i%2].Accept(ctx, "two", header, body)
			if err == nil && res.Outcome != OutcomeProcessed {
				err = fmt.Errorf("event %s: %s", id, res.Outcome)
			}
			outcomes <- err
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	noise.Wait()
	for range events {
		require.NoError(t, <-outcomes)
	}
	for range 6 {
		require.NoError(t, <-noiseErrs)
	}

	require.Positive(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE payload->>'mark' LIKE 'noise/%'`))
	require.Equal(t, 2*events, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages`))
	require.Equal(t, 2*events, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id
		JOIN switchyard.outbox o ON o.id = m.outbox_id
		WHERE o.payload->>'mark' IN (e.event_id || '/1', e.event_id || '/2')`), "every link is to its own event's messages")
}
