package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// flakyReceiver is a webhook receiver that refuses (422) until healed.
type flakyReceiver struct{ healed atomic.Bool }

func (f *flakyReceiver) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if !f.healed.Load() {
		w.WriteHeader(http.StatusUnprocessableEntity)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// startConsoleWithReceiver runs a console whose dispatcher delivers to
// destination "hook", a flakyReceiver, with one attempt per message.
func startConsoleWithReceiver(t *testing.T) (withAccounts, *flakyReceiver) {
	t.Helper()
	receiver := &flakyReceiver{}
	srv := httptest.NewServer(receiver)
	t.Cleanup(srv.Close)
	dbURL := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// Before the console starts: its dispatcher routes the destinations it
	// finds then.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts)
		VALUES ('hook', 'webhook', $1, 'E2E_HOOK_SECRET', 100, 200, 1)`, srv.URL)
	require.NoError(t, err)
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL,
		"E2E_HOOK_SECRET=whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="})
	t.Cleanup(func() { p.Stop(t) })
	svc := e2eAuth(pool, auth.Config{Notify: func() { _ = changefeed.Notify(ctx, pool) }})
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		require.NoError(t, svc.AddUser(ctx, auth.CLI, r.String(), r, e2ePassword))
	}
	return withAccounts{Process: p, svc: svc, pool: pool}, receiver
}

// Issue 14, items 1 to 4 on the on-call path: an outage leaves dead
// letters; once the receiver is fixed, a replay from the actions page is
// followed live on that page and on the message's own page until it is
// delivered; "Replay this group" opens bulk replay filtered to the group,
// and the job shows its replays delivered as they settle; "dead" then
// lists nothing, "replayed" lists every original with its outcome.
func TestOnCallReplayIsFollowedUntilDelivered(t *testing.T) {
	t.Parallel()
	console, receiver := startConsoleWithReceiver(t)
	pool := console.pool
	expect := newExpect()
	long := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(expectTimeout)}
	longContains := playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(expectTimeout)}
	enqueue(t, pool, "hook", 3)
	testwait.Until(t, time.Minute, "three dead letters", func() bool {
		return count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead'`) == 3
	})
	var first int64
	var fingerprint string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT min(id), min(error_fingerprint) FROM switchyard.outbox`).Scan(&first, &fingerprint))

	operator := signedIn(t, console, "operator", "/messages?state=dead")
	require.NoError(t, expect.Locator(operator.GetByTestId("message-row")).ToHaveCount(3))
	screenshot(t, operator, "oncall-dead-list")

	receiver.healed.Store(true)
	watcher := signedIn(t, console, "admin", fmt.Sprintf("/messages/%d", first))
	openLive(t, operator, fmt.Sprintf("/messages/%d/actions", first), actionsLiveFetch)
	require.NoError(t, expect.Locator(operator.GetByTestId("message-recent").GetByTestId("attempt-row")).ToHaveCount(1), "its last attempt beside the buttons")
	// The replay's answer is held until the replay is delivered and the
	// live refresh has shown it: an answer landing after a newer refresh
	// (as under load) must not leave its older snapshot on the page.
	held := holdAnswer(t, operator, fmt.Sprintf(`^/messages/%d/actions/replay$`, first))
	require.NoError(t, operator.GetByTestId("replay-submit").Click())
	held.arrived(t)
	testwait.Until(t, time.Minute, "the replay delivered", func() bool {
		return count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1 AND state = 'delivered'`, first) == 1
	})
	require.NoError(t, expect.Locator(operator.GetByTestId("actions-status")).ToContainText("the latest replay is delivered", longContains))
	held.release(t)
	require.NoError(t, expect.Locator(operator.GetByTestId("action-notice")).ToContainText("Replayed (redeliver)"))
	// Delivered by the dispatcher: both pages follow without a reload.
	require.NoError(t, expect.Locator(operator.GetByTestId("actions-status")).ToContainText("the latest replay is delivered", longContains))
	requireNotReloaded(t, operator)
	status := watcher.GetByTestId("message-status")
	require.NoError(t, expect.Locator(status.GetByTestId("replay-outcome")).ToHaveText("→ delivered", long))
	screenshot(t, operator, "oncall-actions-delivered")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1 AND state = 'delivered'`, first))

	// The rest of the group, as one bulk job opened from the group.
	_, err := operator.Goto("/dead-letters/" + url.PathEscape(fingerprint))
	require.NoError(t, err)
	require.NoError(t, operator.GetByTestId("bulk-replay-link").Click())
	require.NoError(t, expect.Locator(operator.GetByTestId("bulk-fingerprint")).ToHaveValue(fingerprint))
	require.NoError(t, operator.GetByTestId("bulk-estimate").Click())
	require.NoError(t, expect.Locator(operator.GetByTestId("bulk-estimate-count")).ToHaveText("2 dead messages match."))
	require.NoError(t, operator.GetByTestId("bulk-start").Click())
	job := operator.GetByTestId("replay-job")
	require.NoError(t, expect.Locator(job.GetByTestId("job-delivered")).ToHaveText("2 delivered", long))
	require.NoError(t, expect.Locator(job.GetByTestId("job-pending")).ToHaveText("0 pending"))
	screenshot(t, operator, "oncall-job-delivered")
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_job IS NOT NULL AND state = 'delivered'`))

	_, err = operator.Goto("/messages?state=dead")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(operator.GetByTestId("message-row")).ToHaveCount(0))
	_, err = operator.Goto("/messages?state=replayed")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(operator.GetByTestId("replay-outcome")).ToHaveText([]string{"→ delivered", "→ delivered", "→ delivered"}))
	for _, width := range []int{1400, 800, 390} {
		require.NoError(t, operator.SetViewportSize(width, 900))
		screenshot(t, operator, fmt.Sprintf("oncall-replayed-%d", width))
	}
}

// Issue 14, item 5: a blocked aggregate's row replays its dead head; the
// list reloads without it, and the page says what happened.
func TestBlockedAggregateUnblocksFromItsRow(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	deadMessages(t, console.pool, 1, `{"order":4}`) // the destination and a group
	var head int64
	// With its aggregate from the start: the enqueue trigger numbers it.
	require.NoError(t, console.pool.QueryRow(context.Background(), `INSERT INTO switchyard.outbox
		(topic, destination, aggregate_type, aggregate_id, payload, state, attempts, last_error, error_fingerprint, finished_at)
		VALUES ('orders.created', 'billing', 'order', 'o-5', '{"order":5}', 'dead', 3, 'HTTP 422: rejected', 'fp-422', now())
		RETURNING id`).Scan(&head))
	_, err := console.pool.Exec(context.Background(), `INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		VALUES ('billing', 'order', 'o-5', $1)`, head)
	require.NoError(t, err)
	page := signedIn(t, console, "operator", "/aggregates/blocked")
	expect := newExpect()
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-row")).ToHaveCount(1))
	screenshot(t, page, "blocked-aggregates-actions")

	require.NoError(t, page.GetByTestId("head-replay").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-result")).ToContainText("the aggregate flows again"))
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-row")).ToHaveCount(0))
	screenshot(t, page, "blocked-aggregates-unblocked")
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, head))
	require.Zero(t, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`))
}
