package inbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/backoff"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testwait"
)

const builtinSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// instances returns n receivers, each on a pool of its own (as n console
// instances would be), loaded from switchyard.inbox_sources.
func instances(t *testing.T, pool *pgxpool.Pool, n int) []*Receiver {
	t.Helper()
	out := make([]*Receiver, n)
	for i := range out {
		p, err := pgxpool.NewWithConfig(context.Background(), pool.Config().Copy())
		require.NoError(t, err)
		t.Cleanup(p.Close)
		out[i] = NewReceiver(ReceiverConfig{Pool: p, Getenv: func(string) string { return builtinSecret }})
		require.NoError(t, out[i].Load(context.Background()))
	}
	return out
}

// exec runs test SQL.
func exec(t *testing.T, pool *pgxpool.Pool, stmt string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), stmt, args...)
	require.NoError(t, err)
}

// storm delivers the same signed event 50 times at once, alternating
// between the receivers, and counts the outcomes.
func storm(t *testing.T, receivers []*Receiver, source, id string, body []byte) map[Outcome]int {
	t.Helper()
	const n = 50
	var mu sync.Mutex
	outcomes := map[Outcome]int{}
	testwait.Together(n, func(i int) {
		h := standardHeader(t, id, time.Now().Unix(), []string{builtinSecret}, body)
		res, err := receivers[i%len(receivers)].Accept(context.Background(), source, h, body)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			outcomes["error: "+Outcome(err.Error())]++
			return
		}
		outcomes[res.Outcome]++
	})
	return outcomes
}

// forwardSource configures a 'forward' source in front of a destination.
func forwardSource(t *testing.T, pool *pgxpool.Pool, entityField string) {
	t.Helper()
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('crm-service', 'webhook', 'http://127.0.0.1:1/')`)
	exec(t, pool, `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field)
		VALUES ('crm', 'standard-webhooks', '{CRM_SECRET}', 'forward', 'crm-service', $1)`, entityField)
}

// The same event sent 50 times at once to two instances of a 'forward'
// source is recorded once and enqueued once, with the bytes that were
// sent, in the transaction that records it.
func TestForwardEnqueuesOnceUnderConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	forwardSource(t, pool, "data.customer.id")
	body := []byte(`{"type":"customer.updated", "data":{"customer":{"id":"cus_1"},"total":1.50}}`)

	outcomes := storm(t, instances(t, pool, 2), "crm", "evt_1", body)
	require.Equal(t, map[Outcome]int{OutcomeProcessed: 1, OutcomeDuplicate: 49}, outcomes)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events`))
	var topic, aggType, aggID, payload, src, eventID string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT topic, aggregate_type, aggregate_id, payload::text,
			headers->>'Switchyard-Inbox-Source', headers->>'Switchyard-Inbox-Event-Id'
		FROM switchyard.outbox WHERE destination = 'crm-service'`).Scan(&topic, &aggType, &aggID, &payload, &src, &eventID))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox`), "one outbox message")
	require.Equal(t, "customer.updated", topic, "the payload's type is the topic")
	require.Equal(t, "inbox:crm", aggType)
	require.Equal(t, "cus_1", aggID, "ordered per entity")
	require.JSONEq(t, string(body), payload)
	require.Equal(t, []string{"crm", "evt_1"}, []string{src, eventID})

	// The dispatcher delivers it once, with its message id.
	var messageID string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT message_id::text FROM switchyard.outbox`).Scan(&messageID))
	deliveries := make(chan destination.Delivery, 50)
	d := outbox.New(pool, outbox.Config{Routes: map[string]outbox.Route{"crm-service": {
		Destination: destination.Func(func(_ context.Context, m destination.Delivery) (destination.Outcome, error) {
			deliveries <- m
			return destination.Outcome{StatusCode: 200}, nil
		}),
		Retry: backoff.Policy{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxAttempts: 3},
	}}})
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(d.Stop) // idempotent: for a test that fails before the Stop below
	got := testwait.For(t, 30*time.Second, "the forwarded message's delivery", deliveries)
	testwait.Until(t, 30*time.Second, "the message finalized", func() bool {
		return count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'delivered'`) == 1
	})
	d.Stop()
	require.Equal(t, messageID, got.MessageID)
	// The same JSON: the outbox stores payloads as jsonb, which reorders
	// keys (byte fidelity is issue 13's item 6).
	require.JSONEq(t, string(body), string(got.Payload))
	require.Empty(t, deliveries, "delivered once")
}

// The messages a 'forward' source enqueues for one entity are in the order
// their events were received, each entity in its own aggregate; a payload
// without the entity field is a failed attempt, not an unordered message.
func TestForwardOrdersPerEntity(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	forwardSource(t, pool, "customer_id")
	r := instances(t, pool, 1)[0]
	send := func(id, body string) (Result, error) {
		h := standardHeader(t, id, time.Now().Unix(), []string{builtinSecret}, []byte(body))
		return r.Accept(context.Background(), "crm", h, []byte(body))
	}
	for i := 1; i <= 6; i++ {
		customer := []string{"a", "b"}[i%2]
		_, err := send(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"customer_id":%q,"n":%d}`, customer, i))
		require.NoError(t, err)
	}
	for customer, want := range map[string][]string{"a": {"evt_2", "evt_4", "evt_6"}, "b": {"evt_1", "evt_3", "evt_5"}} {
		rows, err := pool.Query(context.Background(), `SELECT headers->>'Switchyard-Inbox-Event-Id' FROM switchyard.outbox
			WHERE aggregate_type = 'inbox:crm' AND aggregate_id = $1 ORDER BY aggregate_seq`, customer)
		require.NoError(t, err)
		var got []string
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			got = append(got, id)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, want, got, "customer %s", customer)
	}

	res, err := send("evt_x", `{"n":7}`)
	require.ErrorIs(t, err, ErrHandler)
	require.Equal(t, OutcomeFailed, res.Outcome)
	require.Contains(t, err.Error(), `no string or number at "customer_id"`)
	require.Equal(t, 6, count(t, pool, `SELECT count(*) FROM switchyard.outbox`))
}

// teamSchema is the team's own table and functions for 'sql' sources.
const teamSchema = `
CREATE SCHEMA team;
CREATE TABLE team.payments (event_id text PRIMARY KEY, amount numeric NOT NULL, via text NOT NULL);
CREATE FUNCTION team.record_payment(event jsonb, headers jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO team.payments (event_id, amount, via) VALUES (event->>'id', (event->>'amount')::numeric, headers->>'webhook-id')
$$;
CREATE FUNCTION team.refuse(event jsonb, headers jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO team.payments (event_id, amount, via) VALUES (event->>'id', 0, 'refuse');
    RAISE EXCEPTION 'amount % is over the limit', event->>'amount';
END
$$;`

// A 'sql' source calls the team's function once per event, also when the
// event arrives 50 times at once at two instances.
func TestSQLHandlerEffectOnceUnderConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	exec(t, pool, teamSchema)
	exec(t, pool, `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function)
		VALUES ('payments', 'standard-webhooks', '{PAY_SECRET}', 'sql', 'team.record_payment')`)

	outcomes := storm(t, instances(t, pool, 2), "payments", "msg_1", []byte(`{"id":"pay_1","amount":42.5}`))
	require.Equal(t, map[Outcome]int{OutcomeProcessed: 1, OutcomeDuplicate: 49}, outcomes)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM team.payments WHERE event_id = 'pay_1' AND amount = 42.5 AND via = 'msg_1'`),
		"one effect, with the event and its headers")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM team.payments`))
}

// A function that raises is a failed attempt: its writes are rolled back,
// the error is recorded, a redelivery retries it, and after max_attempts
// the event is parked.
func TestSQLHandlerRaisingFunctionParksAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	exec(t, pool, teamSchema)
	exec(t, pool, `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function, max_attempts)
		VALUES ('payments', 'standard-webhooks', '{PAY_SECRET}', 'sql', 'team.refuse', 3)`)
	r := instances(t, pool, 1)[0]
	body := []byte(`{"id":"pay_1","amount":1000000}`)
	for attempt := 1; attempt <= 3; attempt++ {
		h := standardHeader(t, "msg_1", time.Now().Unix(), []string{builtinSecret}, body)
		res, err := r.Accept(context.Background(), "payments", h, body)
		require.ErrorIs(t, err, ErrHandler)
		require.Equal(t, attempt, res.Attempts)
		want := OutcomeFailed
		if attempt == 3 {
			want = OutcomeParked
		}
		require.Equal(t, want, res.Outcome)
	}
	st, attempts := status(t, pool, "payments", "msg_1")
	require.Equal(t, []any{"parked", 3}, []any{st, attempts})
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE last_error LIKE '%amount 1000000 is over the limit%'`))
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM team.payments`), "the function's writes rolled back")
}

// A built-in handler's settings are checked where they are stored (CHECK
// constraints) and again where they are used: a bad one leaves the source
// misconfigured, never runs SQL it names.
func TestBuiltinHandlerSettingsAreValidated(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	for _, stmt := range []string{
		`INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler) VALUES ('a', 'stripe', '{S}', 'forward')`,
		`INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler) VALUES ('b', 'stripe', '{S}', 'sql')`,
		`INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function) VALUES ('c', 'stripe', '{S}', 'sql', 'team.f(); DROP TABLE x; --')`,
		`INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function) VALUES ('d', 'stripe', '{S}', 'sql', 'Team.F')`,
		`INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field) VALUES ('e', 'stripe', '{S}', 'forward', 'x', 'a..b')`,
	} {
		_, err := pool.Exec(context.Background(), stmt)
		require.Error(t, err, stmt)
	}
	_, err := pool.Exec(context.Background(), `SELECT switchyard.inbox_call('pg_catalog.now(); --', '{}', '{}')`)
	require.ErrorContains(t, err, "invalid function name")

	tests := []struct {
		handler, forwardTo, entityField, fn, problem string
	}{
		{HandlerForward, "", "", "", "forward_to names no destination"},
		{HandlerForward, "svc", "a b", "", "is not a dotted path"},
		{HandlerSQL, "", "", "team.f; drop", "is not schema.function"},
		{HandlerSQL, "", "", "f", "is not schema.function"},
		{HandlerForward, "svc", "data.id", "", ""},
		{HandlerSQL, "", "", "team.f", ""},
	}
	for _, tt := range tests {
		row := sourceRow("s", tt.handler)
		row.ForwardTo, row.EntityField, row.SqlFunction = tt.forwardTo, tt.entityField, tt.fn
		src := SourceFromRow(row, func(string) string { return builtinSecret })
		if tt.problem == "" {
			require.NoError(t, src.Problem)
			require.NotNil(t, src.Builtin)
			continue
		}
		require.ErrorContains(t, src.Problem, tt.problem)
	}
}

// sourceRow is an inbox_sources row as Load reads it.
func sourceRow(name, handler string) queries.SwitchyardInboxSource {
	return queries.SwitchyardInboxSource{
		Name: name, Scheme: SchemeStandardWebhooks, SecretRefs: []string{"S"}, ToleranceSeconds: 300,
		OutOfOrder: string(OutOfOrderApply), Handler: handler, MaxAttempts: 5,
	}
}

// A 'forward' source whose destination does not exist yet refuses events
// as transient (503 to the sender): nothing recorded, no attempt used, so
// nothing is parked; once the destination exists the retry goes through.
func TestForwardToAMissingDestinationUsesNoAttempt(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	exec(t, pool, `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, max_attempts)
		VALUES ('crm', 'standard-webhooks', '{CRM_SECRET}', 'forward', 'later', 1)`)
	r := instances(t, pool, 1)[0]
	body := []byte(`{"n":1}`)
	send := func() (Result, error) {
		return r.Accept(context.Background(), "crm", standardHeader(t, "evt_1", time.Now().Unix(), []string{builtinSecret}, body), body)
	}
	for range 3 {
		_, err := send()
		require.ErrorIs(t, err, ErrTransient)
		require.ErrorContains(t, err, `unknown destination "later"`)
	}
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events`), "nothing recorded, nothing parked")
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('later', 'webhook', 'http://127.0.0.1:1/')`)
	res, err := send()
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'later' AND topic = 'crm'`),
		"without a type in the payload, the topic is the source's name")
}

// A 'forward' event delivered 50 times at once: its page's record links
// the one message it enqueued, and holds each of the 49 duplicate
// deliveries (also those that raced the first one); pruning the event
// takes both with it.
func TestForwardLinksItsMessageAndRecordsDuplicates(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	forwardSource(t, pool, "")
	body := []byte(`{"type":"customer.updated","data":{"id":"cus_2"}}`)

	outcomes := storm(t, instances(t, pool, 2), "crm", "evt_dup", body)
	require.Equal(t, map[Outcome]int{OutcomeProcessed: 1, OutcomeDuplicate: 49}, outcomes)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id AND e.event_id = 'evt_dup'
		JOIN switchyard.outbox o ON o.id = m.outbox_id AND o.headers->>'Switchyard-Inbox-Event-Id' = 'evt_dup'`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages`))
	require.Equal(t, 49, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_duplicates WHERE source = 'crm' AND event_id = 'evt_dup'`))

	pruned, err := queries.New(pool).InboxEventPrune(context.Background(), queries.InboxEventPruneParams{AgeSeconds: -1, BatchSize: 10})
	require.NoError(t, err)
	require.Equal(t, int64(1), pruned)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_duplicates`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox`), "the message stays")
}

// A new event through a forward source costs one statement, run on its
// own: the claim, the message and its link, in the statement's implicit
// transaction (receiveOnce); a duplicate costs one statement too. Through
// the general path (Receive with the handler alone, as for an event with
// an entity version) it costs what one through a Go handler with one
// statement costs: the claim's batch (with its BEGIN), one statement that
// looks the destination up, inserts the message and links it, and the
// commit. Either way the message is linked and ordered, and a destination
// that does not exist is refused as transient, with nothing written.
func TestForwardSendsOneStatementPerEvent(t *testing.T) {
	t.Parallel()
	pool, ordered, unordered, missing := forwardSetup(t)
	traced, sent := tracedPool(t, pool)
	ctx := context.Background()
	forwardEvent := func(id string) Event {
		ev := event(id)
		ev.Payload = fmt.Appendf(nil, `{"type":"customer.updated","customer_id":"cus_1","event":%q}`, id)
		return ev
	}
	inOne := func(id string, reg Registration) {
		t.Helper()
		res, err := receive(ctx, traced, forwardEvent(id), reg)
		require.NoError(t, err, id)
		require.Equal(t, OutcomeProcessed, res.Outcome, id)
		got := sent.take()
		require.Len(t, got, 1, "%s: one statement: %q", id, got)
		require.Contains(t, got[0], "INSERT INTO switchyard.inbox_event_messages", id)
	}
	inOne("evt_1", ordered)
	inOne("evt_2", ordered)
	inOne("evt_3", unordered)

	res, err := receive(ctx, traced, forwardEvent("evt_1"), ordered)
	require.NoError(t, err)
	require.Equal(t, OutcomeDuplicate, res.Outcome)
	require.Len(t, sent.take(), 1, "a duplicate: one statement")
	require.Equal(t, 1, count(t, pool, `SELECT coalesce(sum(count), 0)::int FROM switchyard.inbox_duplicates WHERE source = 'test'`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_duplicates WHERE event_id = 'evt_1'`))

	// The general path.
	res, err = Receive(ctx, traced, forwardEvent("evt_5"), ordered.Handle)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	got := sent.take()
	require.Len(t, got, 3, "the claim's batch, one statement, the commit: %q", got)
	require.Equal(t, "batch", got[0])
	require.Contains(t, got[1], "INSERT INTO switchyard.inbox_event_messages")
	require.Equal(t, "commit", got[2])
	_, err = Receive(ctx, traced, forwardEvent("evt_5"), ordered.Handle)
	require.NoError(t, err)
	require.Equal(t, []string{"batch", "commit"}, sent.take(), "a duplicate")

	for name, receiveMissing := range map[string]func() error{
		"one statement": func() error { _, err := receive(ctx, traced, event("evt_4"), missing); return err },
		"general path":  func() error { _, err := Receive(ctx, traced, event("evt_4"), missing.Handle); return err },
	} {
		err := receiveMissing()
		require.ErrorIs(t, err, ErrTransient, name)
		require.ErrorIs(t, err, outbox.ErrUnknownDestination, name)
		require.ErrorContains(t, err, `unknown destination "later"`, name)
	}
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE event_id = 'evt_4'`), "nothing recorded")

	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM switchyard.outbox`))
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id
		JOIN switchyard.outbox o ON o.id = m.outbox_id AND o.payload->>'event' = e.event_id`), "each message linked to its own event")
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM switchyard.outbox
		WHERE headers->>'Switchyard-Inbox-Source' = 'test' AND headers->>'Switchyard-Inbox-Event-Id' = payload->>'event'
		AND topic = 'customer.updated'`), "each message names its event and topic")
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM switchyard.outbox
		WHERE aggregate_type = 'inbox:test' AND aggregate_id = 'cus_1' AND aggregate_seq IS NOT NULL`), "the ordered ones in their aggregate")
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM switchyard.outbox
		WHERE aggregate_id = 'cus_1' AND aggregate_seq = (SELECT count(*) FROM switchyard.outbox p
			WHERE p.aggregate_id = 'cus_1' AND p.id <= outbox.id)`), "in the order their events were recorded")
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE status = 'processed' AND processed_at IS NOT NULL
		AND headers::text <> '' AND payload->>'event' = event_id`), "every event recorded with its payload")
}

// The one statement takes a failed event again, as the claim does: an
// event that failed (its payload had no entity id where the source then
// ordered by one) is processed by a redelivery in one statement, its
// failed attempt kept. A redelivery to a forward source whose destination
// is gone falls back to the general path, which counts it as a duplicate
// once.
func TestForwardInOneStatementRetriesAFailedEventAndCountsADuplicateOnce(t *testing.T) {
	t.Parallel()
	pool, ordered, unordered, missing := forwardSetup(t)
	traced, sent := tracedPool(t, pool)
	ctx := context.Background()

	res, err := receive(ctx, traced, event("evt_1"), ordered)
	require.ErrorIs(t, err, ErrHandler)
	require.Equal(t, OutcomeFailed, res.Outcome)
	sent.take()
	res, err = receive(ctx, traced, event("evt_1"), unordered)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Len(t, sent.take(), 1, "the redelivery: one statement")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events
		WHERE event_id = 'evt_1' AND status = 'processed' AND attempts = 1`), "processed, its failed attempt kept")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_messages m
		JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id WHERE e.event_id = 'evt_1'`))

	res, err = receive(ctx, traced, event("evt_1"), missing)
	require.NoError(t, err)
	require.Equal(t, OutcomeDuplicate, res.Outcome)
	require.Equal(t, 1, count(t, pool, `SELECT coalesce(sum(count), 0)::int FROM switchyard.inbox_duplicates`), "counted once")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_duplicates`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox`))
}

// forwardSetup is a database with destination crm-service and three
// forward sources' handlers: to it ordered by customer_id, to it
// unordered, and to a destination that does not exist.
func forwardSetup(t *testing.T) (pool *pgxpool.Pool, ordered, unordered, missing Registration) {
	t.Helper()
	pool = setup(t)
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind) VALUES ('crm-service', 'function')`)
	var err error
	ordered, err = forwardRegistration("test", "crm-service", "customer_id")
	require.NoError(t, err)
	unordered, err = forwardRegistration("test", "crm-service", "")
	require.NoError(t, err)
	missing, err = forwardRegistration("test", "later", "")
	require.NoError(t, err)
	return pool, ordered, unordered, missing
}

// A new event through a 'sql' source costs one statement, run on its own:
// the claim and the function's call in its implicit transaction; so does
// a duplicate. A function that raises fails that statement, which writes
// nothing: the general path then calls it again and records the failure.
func TestSQLHandlerSendsOneStatementPerEvent(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	exec(t, pool, teamSchema)
	record, err := sqlRegistration("team.record_payment")
	require.NoError(t, err)
	refuse, err := sqlRegistration("team.refuse")
	require.NoError(t, err)
	traced, sent := tracedPool(t, pool)
	ctx := context.Background()
	payment := func(id string) Event {
		ev := event(id)
		ev.Payload = fmt.Appendf(nil, `{"id":%q,"amount":42.5}`, id)
		return ev
	}

	res, err := receive(ctx, traced, payment("pay_1"), record)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Len(t, sent.take(), 1, "one statement")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM team.payments WHERE event_id = 'pay_1' AND amount = 42.5 AND via = 'pay_1'`),
		"the function's effect, with the event and its headers")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE event_id = 'pay_1' AND status = 'processed'`))

	res, err = receive(ctx, traced, payment("pay_1"), record)
	require.NoError(t, err)
	require.Equal(t, OutcomeDuplicate, res.Outcome)
	require.Len(t, sent.take(), 1, "a duplicate: one statement")
	require.Equal(t, 1, count(t, pool, `SELECT coalesce(sum(count), 0)::int FROM switchyard.inbox_duplicates`))

	res, err = receive(ctx, traced, payment("pay_2"), refuse)
	require.ErrorIs(t, err, ErrHandler)
	require.Equal(t, OutcomeFailed, res.Outcome)
	require.Greater(t, len(sent.take()), 1, "the failed statement, then the general path")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events
		WHERE event_id = 'pay_2' AND status = 'failed' AND attempts = 1 AND last_error LIKE '%over the limit%'`), "one failed attempt recorded")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM team.payments`), "the raising function's writes rolled back")
}
