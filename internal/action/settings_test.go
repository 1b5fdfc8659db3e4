package action_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/destination/jetstream/jstest"
	"github.com/switchyard/switchyard/internal/destination/registry"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func getenv(name string) string {
	if name == "CRM_SECRET" || name == "HOOK_SECRET" {
		return testSecret
	}
	return ""
}

// webhookInput is a valid webhook destination's form.
func webhookInput(name string) action.DestinationInput {
	return action.DestinationInput{
		Create: true, Name: name, Kind: action.KindWebhook, Address: "https://crm.example/hooks",
		SecretRefs: "HOOK_SECRET", Concurrency: "4", RatePerSecond: "0", Burst: "1", TimeoutMs: "5000",
		BreakerFailurePercent: "50", BreakerMinRequests: "10", BreakerOpenMs: "30000",
		RetryBaseMs: "1000", RetryCapMs: "600000", MaxAttempts: "12", Permanent: action.PermanentDefault, Enabled: true,
	}
}

// forwardInput is a valid forward source's form, to destination billing.
func forwardInput(name string) action.SourceInput {
	return action.SourceInput{
		Create: true, Name: name, Scheme: inbox.SchemeStandardWebhooks, SecretRefs: "CRM_SECRET",
		Handler: inbox.HandlerForward, ForwardTo: "billing", EntityField: "data.customer.id",
		ToleranceSeconds: "300", OutOfOrder: "apply", MaxAttempts: "5", Enabled: true,
	}
}

// TestSettingsActionsRefuseViewerAndOperator: only an admin changes the
// configuration or sends test events; a refusal records nothing.
func TestSettingsActionsRefuseViewerAndOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	before := b.footprint(t)
	for _, a := range []action.Actor{b.viewer, b.operator} {
		_, err := b.svc.DestinationSave(ctx, b.pool, a, webhookInput("crm"))
		requireRefused(t, err, action.KindForbidden)
		_, err = b.svc.SourceSave(ctx, b.pool, a, forwardInput("crm"))
		requireRefused(t, err, action.KindForbidden)
		_, err = b.svc.DestinationTest(ctx, b.pool, a, action.DestinationTestInput{Name: "billing"})
		requireRefused(t, err, action.KindForbidden)
		_, err = b.svc.SourceTest(ctx, b.pool, a, action.SourceTestInput{Name: "crm"})
		requireRefused(t, err, action.KindForbidden)
	}
	require.Equal(t, before, b.footprint(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'crm'`))
}

// TestDestinationSaveNamesTheFieldAtFault: each wrong field is refused
// with its name and a reason, and nothing is written.
func TestDestinationSaveNamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.footprint(t)
	for _, c := range []struct {
		edit  func(*action.DestinationInput)
		field string
		says  string
	}{
		{func(in *action.DestinationInput) { in.Name = "Bad Name" }, "name", "a-z"},
		{func(in *action.DestinationInput) { in.Kind = "smtp" }, "kind", "webhook, jetstream or function"},
		{func(in *action.DestinationInput) { in.Address = "ftp://x" }, "address", "scheme must be http or https"},
		{func(in *action.DestinationInput) { in.Kind, in.Address = action.KindJetStream, "orders.>" }, "address", "jetstream"},
		{func(in *action.DestinationInput) { in.SecretRefs = "" }, "secret_refs", "at least one"},
		{func(in *action.DestinationInput) { in.SecretRefs = testSecret + "!" }, "secret_refs", "never the secret"},
		{func(in *action.DestinationInput) { in.Concurrency = "0" }, "concurrency", "from 1 to 10000"},
		{func(in *action.DestinationInput) { in.RatePerSecond = "fast" }, "rate_per_second", `got "fast"`},
		{func(in *action.DestinationInput) { in.BreakerFailurePercent = "150" }, "breaker_failure_percent", "from 1 to 100"},
		{func(in *action.DestinationInput) { in.RetryCapMs = "10" }, "retry_cap_ms", "at least the first one"},
		{func(in *action.DestinationInput) { in.MaxAttempts = "" }, "max_attempts", "whole number"},
		{func(in *action.DestinationInput) {
			in.Permanent, in.PermanentStatuses = action.PermanentList, "400, 302"
		}, "permanent_statuses", `"302" is not an HTTP status`},
	} {
		in := webhookInput("crm")
		c.edit(&in)
		_, err := b.svc.DestinationSave(context.Background(), b.pool, b.admin, in)
		r := requireRefused(t, err, action.KindInvalid)
		require.Equal(t, c.field, r.Field, r.Message)
		require.Contains(t, r.Message, c.says)
	}
	require.Equal(t, before, b.footprint(t))
}

// TestDestinationSaveCreatesEditsAndAudits: a create and an edit each
// write the row, one audit row with the before and after, and a config
// change; a taken name and an unknown one are refused.
func TestDestinationSaveCreatesEditsAndAudits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	saved, err := b.svc.DestinationSave(ctx, b.pool, b.admin, webhookInput("crm"))
	require.NoError(t, err)
	require.Equal(t, "HOOK_SECRET", saved.Row.SecretRef)
	require.Nil(t, saved.Row.PermanentStatuses, "the default policy is NULL")

	_, err = b.svc.DestinationSave(ctx, b.pool, b.admin, webhookInput("crm"))
	requireRefused(t, err, action.KindConflict)

	in := webhookInput("crm")
	in.Create, in.SecretRefs, in.Permanent, in.PermanentStatuses, in.Enabled = false, "HOOK_SECRET\nNEXT_SECRET", action.PermanentList, "400 422", false
	saved, err = b.svc.DestinationSave(ctx, b.pool, b.admin, in)
	require.NoError(t, err)
	require.Equal(t, []string{"NEXT_SECRET"}, saved.Row.SecretRefs)
	require.Equal(t, []int32{400, 422}, saved.Row.PermanentStatuses)
	require.True(t, saved.Row.Disabled)

	in.Name = "nowhere"
	_, err = b.svc.DestinationSave(ctx, b.pool, b.admin, in)
	requireRefused(t, err, action.KindNotFound)

	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.create' AND actor = 'ada' AND target = 'destination crm'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.update'
		AND detail->'before'->>'enabled' = 'true' AND detail->'after'->>'enabled' = 'false'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'config' AND subject = 'destination/crm'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE detail::text LIKE '%'||$1||'%'`, testSecret), "secrets never reach the audit trail")
}

// TestDestinationSaveChecksTheJetStreamStream: a JetStream destination
// whose subjects no stream captures is saved with the check's verdict
// (kept for the dashboard); saved again once a stream captures them, the
// verdict clears.
func TestDestinationSaveChecksTheJetStreamStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := jstest.New(t)
	svc := action.New(action.Config{NATSURL: srv.URL})
	ctx := context.Background()
	in := webhookInput("orders-js")
	in.Kind, in.Address, in.SecretRefs = action.KindJetStream, "orders", ""
	saved, err := svc.DestinationSave(ctx, b.pool, b.admin, in)
	require.NoError(t, err)
	require.Contains(t, saved.Check, "no stream captures orders.>")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destination_checks WHERE destination = 'orders-js' AND problem LIKE 'no stream captures orders.>%'`))

	nc, err := nats.Connect(srv.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, natsjs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: natsjs.MemoryStorage})
	require.NoError(t, err)

	in.Create = false
	saved, err = svc.DestinationSave(ctx, b.pool, b.admin, in)
	require.NoError(t, err)
	require.Empty(t, saved.Check)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destination_checks WHERE destination = 'orders-js' AND problem = ''`))
}

// TestSourceSaveNamesTheFieldAtFault: wrong settings of a source and of
// its built-in handler are refused with the field and the reason.
func TestSourceSaveNamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.footprint(t)
	for _, c := range []struct {
		edit  func(*action.SourceInput)
		field string
		says  string
	}{
		{func(in *action.SourceInput) { in.Scheme = "github" }, "scheme", "standard-webhooks or stripe"},
		{func(in *action.SourceInput) { in.SecretRefs = " " }, "secret_refs", "at least one"},
		{func(in *action.SourceInput) { in.Handler = "" }, "handler", "forward, sql"},
		{func(in *action.SourceInput) { in.Handler = "demo" }, "handler", `No handler named "demo"`},
		{func(in *action.SourceInput) { in.ForwardTo = "" }, "forward_to", "needs the destination"},
		{func(in *action.SourceInput) { in.ForwardTo = "nowhere" }, "forward_to", "No destination is named nowhere"},
		{func(in *action.SourceInput) { in.EntityField = "data..id" }, "entity_field", "dotted path"},
		{func(in *action.SourceInput) { in.Handler, in.SQLFunction = inbox.HandlerSQL, "Billing.Pay" }, "sql_function", "lower-case"},
		{func(in *action.SourceInput) { in.Handler, in.SQLFunction = inbox.HandlerSQL, "billing.pay" }, "sql_function", "No function billing.pay(jsonb, jsonb)"},
		{func(in *action.SourceInput) { in.Handler, in.SQLFunction = inbox.HandlerSQL, "nosuchschema.pay" }, "sql_function", "No function"},
		{func(in *action.SourceInput) { in.ToleranceSeconds = "-5" }, "tolerance_seconds", "from 1 to 86400"},
		{func(in *action.SourceInput) { in.OutOfOrder = "drop" }, "out_of_order", "apply or hold"},
		{func(in *action.SourceInput) { in.MaxAttempts = "1e3" }, "max_attempts", "whole number"},
	} {
		in := forwardInput("crm")
		c.edit(&in)
		_, err := b.svc.SourceSave(context.Background(), b.pool, b.admin, in)
		r := requireRefused(t, err, action.KindInvalid)
		require.Equal(t, c.field, r.Field, r.Message)
		require.Contains(t, r.Message, c.says)
	}
	require.Equal(t, before, b.footprint(t))
}

// TestDestinationTestEnqueuesThroughTheOutbox: the test message is an
// outbox row to the destination, audited with its id in one transaction;
// a disabled destination is refused.
func TestDestinationTestEnqueuesThroughTheOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sent, err := b.svc.DestinationTest(ctx, b.pool, b.admin, action.DestinationTestInput{Name: "billing"})
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND destination = 'billing'
		AND topic = 'switchyard.test' AND max_attempts = 3 AND message_id = $2`, sent.ID, sent.MessageID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.test' AND (detail->>'message')::bigint = $1`, sent.ID))
	require.Equal(t, int64(1), b.woken.Load(), "the dispatchers are woken for the new message")

	_, err = b.svc.DestinationTest(ctx, b.pool, b.admin, action.DestinationTestInput{Name: "nowhere"})
	requireRefused(t, err, action.KindNotFound)
	_, err = b.pool.Exec(ctx, `UPDATE switchyard.destinations SET disabled = true WHERE name = 'billing'`)
	require.NoError(t, err)
	_, err = b.svc.DestinationTest(ctx, b.pool, b.admin, action.DestinationTestInput{Name: "billing"})
	requireRefused(t, err, action.KindConflict)
}

// receiver is a receiver of b's database that rereads its sources every
// 50 ms until the test ends.
func receiver(t *testing.T, pool *pgxpool.Pool) *inbox.Receiver {
	t.Helper()
	r := inbox.NewReceiver(inbox.ReceiverConfig{Pool: pool, Getenv: getenv, ReloadInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Watch(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return r
}

// TestSourceTestSendsASignedEventThroughTheInbox: a forward source's test
// event, signed in its scheme, is verified and forwarded to its
// destination once; a Stripe source's too; the outcome is audited.
func TestSourceTestSendsASignedEventThroughTheInbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	svc := action.New(action.Config{Getenv: getenv, Inbox: receiver(t, b.pool)})
	_, err := svc.SourceSave(ctx, b.pool, b.admin, forwardInput("crm"))
	require.NoError(t, err)
	stripe := forwardInput("payments")
	stripe.Scheme, stripe.EntityField = inbox.SchemeStripe, ""
	_, err = svc.SourceSave(ctx, b.pool, b.admin, stripe)
	require.NoError(t, err)

	for _, name := range []string{"crm", "payments"} {
		got, err := svc.SourceTest(ctx, b.pool, b.admin, action.SourceTestInput{Name: name})
		require.NoError(t, err)
		require.Equal(t, string(inbox.OutcomeProcessed), got.Outcome, got.Error)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_events WHERE source = $1 AND event_id = $2`, name, got.EventID))
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox_source.test' AND detail->>'event_id' = $1 AND detail->>'outcome' = 'processed'`, got.EventID))
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'billing' AND topic = 'switchyard.test' AND aggregate_id = 'switchyard-test'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'billing'`))

	in := forwardInput("crm")
	in.Create, in.Enabled = false, false
	_, err = svc.SourceSave(ctx, b.pool, b.admin, in)
	require.NoError(t, err)
	got, err := svc.SourceTest(ctx, b.pool, b.admin, action.SourceTestInput{Name: "crm"})
	require.NoError(t, err)
	require.Equal(t, "refused", got.Outcome)
	require.Contains(t, got.Error, "source disabled")

	noSecret := forwardInput("nosecret")
	noSecret.SecretRefs = "UNSET_SECRET"
	_, err = svc.SourceSave(ctx, b.pool, b.admin, noSecret)
	require.NoError(t, err, "a reference that does not resolve here may resolve on the instances that receive")
	_, err = svc.SourceTest(ctx, b.pool, b.admin, action.SourceTestInput{Name: "nosecret"})
	r := requireRefused(t, err, action.KindInvalid)
	require.Equal(t, "secret_refs", r.Field)
}

// TestSavedSettingsReachEveryInstance: two receivers and two registries
// on one database, as two console instances have, each rereading on its
// own: a source disabled and a destination added on the page are used by
// both within their reread interval (10 s in production, 50 ms here).
func TestSavedSettingsReachEveryInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	svc := action.New(action.Config{Getenv: getenv})
	_, err := svc.SourceSave(ctx, b.pool, b.admin, forwardInput("crm"))
	require.NoError(t, err)
	receivers := []*inbox.Receiver{receiver(t, b.pool), receiver(t, b.pool)}

	type routes struct {
		mu  sync.Mutex
		got map[string]outbox.Route
	}
	var seen [2]routes
	for i := range seen {
		reg := registry.New(b.pool, registry.Config{Getenv: getenv, Interval: 50 * time.Millisecond})
		wctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			reg.Watch(wctx, func(r map[string]outbox.Route) { seen[i].mu.Lock(); seen[i].got = r; seen[i].mu.Unlock() })
		})
		t.Cleanup(func() { cancel(); wg.Wait(); reg.Close() })
	}

	accepts := func(r *inbox.Receiver) bool {
		_, err := r.Accept(ctx, "crm", http.Header{}, []byte(`{}`))
		return err == nil || !isMisconfigured(err)
	}
	for _, r := range receivers {
		testwait.Until(t, 5*time.Second, "receiver loads the source", func() bool { return accepts(r) })
	}
	in := forwardInput("crm")
	in.Create, in.Enabled = false, false
	_, err = svc.SourceSave(ctx, b.pool, b.admin, in)
	require.NoError(t, err)
	_, err = svc.DestinationSave(ctx, b.pool, b.admin, webhookInput("crm-service"))
	require.NoError(t, err)
	for i, r := range receivers {
		testwait.Until(t, 5*time.Second, "every receiver refuses the disabled source", func() bool { return !accepts(r) })
		testwait.Until(t, 5*time.Second, "every registry routes the new destination", func() bool {
			seen[i].mu.Lock()
			defer seen[i].mu.Unlock()
			_, ok := seen[i].got["crm-service"]
			return ok
		})
	}
}

func isMisconfigured(err error) bool { return err != nil && errors.Is(err, inbox.ErrMisconfigured) }
