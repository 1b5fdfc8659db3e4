package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/outbox"
)

// statements records what a pool sends: each query by its SQL, each
// batch and each COPY as one entry.
type statements struct {
	mu   sync.Mutex
	sent []string // guarded by mu
}

func (s *statements) add(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, what)
}

// take returns what was sent since the last take.
func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.add("batch")
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (s *statements) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	s.add("copy")
	return ctx
}

func (s *statements) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// tracedPool is a pool of one connection on pool's database that records
// what it sends, connected before it records anything.
func tracedPool(t *testing.T, pool *pgxpool.Pool) (*pgxpool.Pool, *statements) {
	t.Helper()
	cfg := pool.Config().Copy()
	sent := &statements{}
	cfg.ConnConfig.Tracer = sent
	cfg.MaxConns = 1
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(traced.Close)
	require.NoError(t, traced.Ping(context.Background()))
	sent.take()
	return traced, sent
}

// linkTestMessage is message n of event ev.
func linkTestMessage(ev Event, n int) outbox.Message {
	return outbox.Message{Topic: "order.paid", Destination: "warehouse", Payload: fmt.Appendf(nil, `{"event": %q, "n": %d}`, ev.ID, n)}
}

// linked returns the n of each message linked to event id that the
// event's handler enqueued (its payload names the event).
func linked(t *testing.T, pool *pgxpool.Pool, id string) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT (o.payload->>'n')::int FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id
		JOIN switchyard.outbox o ON o.id = m.outbox_id
		WHERE e.event_id = $1 AND o.payload->>'event' = $1
		ORDER BY 1`, id)
	require.NoError(t, err)
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return ns
}

type derivedKey struct{}

// A Go handler's messages, enqueued with outbox.Enqueue under the context
// it was given (or one derived from it), are linked to its event in the
// event's transaction: several calls, a COPY-sized batch, an event
// ordered by its entity. A message rolled back with its savepoint is not
// linked, and a failed handler leaves neither messages nor links. An
// event whose handler enqueues nothing costs no statement more than
// before: the claim's batch and the commit.
func TestGoHandlerMessagesAreLinkedToTheirEvent(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind) VALUES ('warehouse', 'function')`)
	ctx := context.Background()
	handler := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		switch ev.ID {
		case "none":
			return nil
		case "three", "versioned":
			if _, err := outbox.Enqueue(ctx, tx, linkTestMessage(ev, 1), linkTestMessage(ev, 2)); err != nil {
				return err
			}
			_, err := outbox.Enqueue(context.WithValue(ctx, derivedKey{}, "derived"), tx, linkTestMessage(ev, 3))
			return err
		case "savepoint":
			if _, err := outbox.Enqueue(ctx, tx, linkTestMessage(ev, 1)); err != nil {
				return err
			}
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := outbox.Enqueue(ctx, sp, linkTestMessage(ev, 2)); err != nil {
				return err
			}
			return sp.Rollback(ctx)
		case "bulk":
			msgs := make([]outbox.Message, 70) // above Enqueue's COPY threshold (64)
			for i := range msgs {
				msgs[i] = linkTestMessage(ev, i+1)
			}
			_, err := outbox.Enqueue(ctx, tx, msgs...)
			return err
		case "fails":
			if _, err := outbox.Enqueue(ctx, tx, linkTestMessage(ev, 1)); err != nil {
				return err
			}
			return errors.New("refused after enqueueing")
		}
		return fmt.Errorf("no case for event %s", ev.ID)
	}

	traced, sent := tracedPool(t, pool)
	res, err := Receive(ctx, traced, event("none"), handler)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, []string{"batch", "commit"}, sent.take(), "nothing enqueued: no statement more")
	require.Empty(t, linked(t, pool, "none"))

	_, err = Receive(ctx, traced, event("three"), handler)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, linked(t, pool, "three"))
	links := 0
	for _, s := range sent.take() {
		links += strings.Count(s, "inbox_event_messages")
	}
	require.Equal(t, 1, links, "one statement links all the messages of the event")

	for _, id := range []string{"savepoint", "bulk"} {
		_, err = Receive(ctx, pool, event(id), handler)
		require.NoError(t, err, id)
	}
	require.Equal(t, []int{1}, linked(t, pool, "savepoint"), "the message rolled back with its savepoint is not linked")
	require.Len(t, linked(t, pool, "bulk"), 70)

	versioned := event("versioned")
	versioned.EntityKey, versioned.EntityVersion = "order:1", 1
	res, err = Receive(ctx, pool, versioned, handler)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, []int{1, 2, 3}, linked(t, pool, "versioned"))

	res, err = Receive(ctx, pool, event("fails"), handler)
	require.ErrorIs(t, err, ErrHandler)
	require.Equal(t, OutcomeFailed, res.Outcome)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE payload->>'event' = 'fails'`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id WHERE e.event_id = 'fails'`))
	require.Equal(t, 3+1+70+3, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages`), "every link is to its own event's messages")
}
