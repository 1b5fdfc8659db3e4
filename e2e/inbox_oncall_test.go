package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// shopSecret signs the test source's deliveries (Standard Webhooks).
const shopSecret = "whsec_c2hvcC1zZWNyZXQtZm9yLXRoZS1lMmUtdGVzdHM="

// startConsoleForInbox starts a console with accounts and two inbox
// sources: "shop", which forwards each event to the outbox destination
// "billing", ordered by the payload's order.id (an event without one
// fails), and "ship", a 'sql' source whose function team.ship (the team's
// own) enqueues two messages to "warehouse" per event, each carrying the
// event's id. Its workers are off, so enqueued messages stay pending.
func startConsoleForInbox(t *testing.T) withAccounts {
	t.Helper()
	dbURL, pool := newDatabase(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address)
		VALUES ('billing', 'function', 'billing'), ('warehouse', 'function', 'warehouse');
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field, max_attempts)
		VALUES ('shop', 'standard-webhooks', '{E2E_SHOP_SECRET}', 'forward', 'billing', 'order.id', 3);
		CREATE SCHEMA team;
		CREATE FUNCTION team.ship(event jsonb, headers jsonb) RETURNS void LANGUAGE sql AS $$
			INSERT INTO switchyard.outbox (topic, destination, payload)
			SELECT topic, 'warehouse', jsonb_build_object('event', headers->>'webhook-id', 'order', event->'order')
			FROM unnest(ARRAY['order.packed', 'order.shipped']) topic
		$$;
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function, max_attempts)
		VALUES ('ship', 'standard-webhooks', '{E2E_SHOP_SECRET}', 'sql', 'team.ship', 3)`)
	require.NoError(t, err)
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_WORKERS=0", "E2E_SHOP_SECRET=" + shopSecret})
	t.Cleanup(func() { p.Stop(t) })
	svc := e2eAuth(pool, auth.Config{Notify: func() { _ = changefeed.Notify(context.Background(), pool) }})
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		require.NoError(t, svc.AddUser(ctx, auth.CLI, r.String(), r, e2ePassword))
	}
	return withAccounts{Process: p, svc: svc, pool: pool}
}

// deliver posts a signed delivery of event id to source and returns the
// status it was answered with.
func deliver(t *testing.T, console withAccounts, source, id, body string) int {
	t.Helper()
	sig, err := webhook.Sign(shopSecret, id, time.Now(), []byte(body))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, console.URL+"/inbox/"+source, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// parked records event id as parked after a failed delivery, as the
// receiver leaves it, and returns its row id.
func parked(t *testing.T, pool *pgxpool.Pool, id, payload string) int64 {
	t.Helper()
	var row int64
	require.NoError(t, pool.QueryRow(context.Background(), `INSERT INTO switchyard.inbox_events (source, event_id, payload, status, attempts, last_error, error_fingerprint)
		VALUES ('shop', $1, $2::json, 'parked', 3, 'forward to billing: destination refused', 'forward to billing: destination refused') RETURNING id`, id, payload).Scan(&row))
	return row
}

var inboxEventLiveFetch = regexp.MustCompile(`/inbox/events/\d+/live$`)

// An operator retries parked events: one from its page, whose payload the
// handler still refuses (the attempt is listed with its error, the event
// stays parked, the notice says so), and one from the list, which is
// processed: its page then shows every attempt and the outbox message it
// caused, linked. Each retry is one audit row; a viewer sees no Retry.
func TestInboxRetryFromPageAndList(t *testing.T) {
	t.Parallel()
	console := startConsoleForInbox(t)
	bad := parked(t, console.pool, "evt_no_order", `{"type": "order.paid"}`)
	good := parked(t, console.pool, "evt_paid", `{"type": "order.paid", "order": {"id": 42}}`)
	expect := newExpect()

	page := signedInAs(t, console, "operator", fmt.Sprintf("/inbox/events/%d", bad))
	require.NoError(t, expect.Locator(page.GetByTestId("event-attempts")).ToHaveText("3"))
	require.NoError(t, page.GetByTestId("retry-reason").Fill("billing fixed its destination"))
	require.NoError(t, page.GetByTestId("event-retry-submit").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("retry-notice")).ToContainText("failed again, attempt 4, now parked"))
	require.NoError(t, expect.Locator(page.GetByTestId("retry-notice")).ToContainText("order.id"))
	attempts := page.GetByTestId("event-attempt")
	require.NoError(t, expect.Locator(attempts).ToHaveCount(1))
	require.NoError(t, expect.Locator(attempts.First()).ToContainText("retry by operator"))
	require.NoError(t, expect.Locator(attempts.First()).ToContainText("order.id"))
	require.NoError(t, expect.Locator(page.GetByTestId("event-attempts")).ToHaveText("4"))
	require.NoError(t, expect.Locator(page.GetByTestId("event-status")).ToHaveText("parked"))
	screenshotWidths(t, page, "inbox-event-retried-failed")

	_, err := page.ExpectResponse(regexp.MustCompile(`/inbox/live`), func() error {
		_, err := page.Goto("/inbox?status=parked")
		return err
	})
	require.NoError(t, err)
	row := page.Locator(fmt.Sprintf("#inbox-event-%d", good))
	require.NoError(t, row.GetByTestId("inbox-retry").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("retry-notice")).ToContainText("evt_paid"))
	require.NoError(t, expect.Locator(page.GetByTestId("retry-notice")).ToContainText("processed"))
	// The list re-reads itself: the processed event leaves the parked ones.
	require.NoError(t, expect.Locator(row).ToHaveCount(0))
	require.NoError(t, expect.Locator(page.GetByTestId("inbox-event-row")).ToHaveCount(1))
	screenshotWidths(t, page, "inbox-list-retried")

	_, err = page.Goto(fmt.Sprintf("/inbox/events/%d", good))
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("event-status")).ToHaveText("processed"))
	require.NoError(t, expect.Locator(page.GetByTestId("event-retry")).ToHaveCount(0))
	var message int64
	require.NoError(t, console.pool.QueryRow(context.Background(), `SELECT outbox_id FROM switchyard.inbox_event_messages WHERE inbox_event_id = $1`, good).Scan(&message))
	link := page.GetByTestId("event-message-link")
	require.NoError(t, expect.Locator(link).ToHaveAttribute("href", fmt.Sprintf("/messages/%d", message)))
	require.NoError(t, expect.Locator(page.GetByTestId("event-message-state")).ToHaveText("pending"))
	screenshotWidths(t, page, "inbox-event-follow-through")
	require.NoError(t, link.Click())
	require.NoError(t, expect.Page(page).ToHaveURL(fmt.Sprintf("%s/messages/%d", console.URL, message)))

	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'billing'`))
	require.Equal(t, 2, count(t, console.pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox.retry' AND actor = 'operator'`))
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox.retry' AND reason = 'billing fixed its destination'`))

	viewer := signedInAs(t, console, "viewer", fmt.Sprintf("/inbox/events/%d", bad))
	require.NoError(t, expect.Locator(viewer.GetByTestId("no-retry")).ToBeVisible())
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-retry-form")).ToHaveCount(0))
	_, err = viewer.Goto("/inbox?status=parked")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(viewer.GetByTestId("inbox-event-row")).ToHaveCount(1))
	require.NoError(t, expect.Locator(viewer.GetByTestId("inbox-retry")).ToHaveCount(0))
}

// A viewer keeps the inbox open: a delivery that fails shows up in the
// list without a reload. A delivery processed on its first attempt shows
// that attempt (its time, processed) and the message it forwarded; each
// later delivery of the same event is listed as a duplicate. An event of a
// 'sql' source leads to the messages its function enqueued (issue 14,
// item 6).
func TestInboxLiveListDuplicatesAndAttempts(t *testing.T) {
	t.Parallel()
	console := startConsoleForInbox(t)
	expect := newExpect()
	viewer := signedInAs(t, console, "viewer", "/inbox")
	openLive(t, viewer, "/inbox", regexp.MustCompile(`/inbox/live$`))
	require.NoError(t, expect.Locator(viewer.GetByTestId("inbox-event-row")).ToHaveCount(0))

	require.Equal(t, http.StatusInternalServerError, deliver(t, console, "shop", "evt_broken", `{"type": "order.paid"}`), "a failed attempt asks the sender to retry")
	// The change feed's path takes well under a second; 5 s is room for
	// the parallel suite, and far less than the list's 10 s poll.
	rows := viewer.GetByTestId("inbox-event-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(1))
	require.NoError(t, expect.Locator(rows.First()).ToContainText("evt_broken"))
	require.NoError(t, expect.Locator(rows.First().GetByTestId("inbox-event-status")).ToHaveText("failed"))
	requireNotReloaded(t, viewer)
	screenshotWidths(t, viewer, "inbox-list-live")

	require.Equal(t, http.StatusOK, deliver(t, console, "shop", "evt_ok", `{"type": "order.paid", "order": {"id": "7"}}`))
	for range 2 {
		require.Equal(t, http.StatusOK, deliver(t, console, "shop", "evt_ok", `{"type": "order.paid", "order": {"id": "7"}}`))
	}
	var id int64
	require.NoError(t, console.pool.QueryRow(context.Background(), `SELECT id FROM switchyard.inbox_events WHERE event_id = 'evt_ok'`).Scan(&id))
	openLive(t, viewer, fmt.Sprintf("/inbox/events/%d", id), inboxEventLiveFetch)
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-attempts")).ToHaveText("1"))
	attempt := viewer.GetByTestId("event-attempt")
	require.NoError(t, expect.Locator(attempt).ToHaveCount(1))
	require.NoError(t, expect.Locator(attempt.GetByTestId("attempt-outcome")).ToHaveText("processed"))
	require.NoError(t, expect.Locator(attempt).ToContainText("delivery"))
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-duplicates")).ToHaveText("2"))
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-duplicate")).ToHaveCount(2))
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-message")).ToHaveCount(1))
	// The delivery's headers were kept, and a viewer may not see them: the
	// page says so rather than that none were recorded.
	require.Positive(t, count(t, console.pool, `SELECT count(*) FROM switchyard.inbox_events, json_object_keys(headers) WHERE id = $1`, id))
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-headers-hidden")).ToBeVisible())
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-headers-none")).ToHaveCount(0))
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'billing'`), "duplicates had no second effect")
	screenshotWidths(t, viewer, "inbox-event-duplicates")

	// The failed one: its attempt with its error; the list says 1.
	_, err := viewer.Goto("/inbox?status=failed")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows.First()).ToContainText("order.id"))
	require.NoError(t, expect.Locator(rows.First().Locator("td.num")).ToHaveText("1"))
	require.NoError(t, rows.First().GetByTestId("inbox-event-link").Click())
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-attempt").GetByTestId("attempt-outcome")).ToHaveText("failed"))
	require.NoError(t, expect.Locator(viewer.GetByTestId("event-attempt")).ToContainText("order.id"))

	sqlSourceFollowThrough(t, console, viewer)
}

// sqlSourceFollowThrough delivers an event to the 'sql' source, whose
// function enqueues two messages while another transaction enqueues to
// the same destination before and after it: the event's page links to
// exactly the function's two, and each link leads to its message.
func sqlSourceFollowThrough(t *testing.T, console withAccounts, page playwright.Page) {
	t.Helper()
	ctx := context.Background()
	expect := newExpect()
	other := `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.packed', 'warehouse', '{"event": "evt_other"}')`
	_, err := console.pool.Exec(ctx, other)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, deliver(t, console, "ship", "evt_ship", `{"type": "order.paid", "order": {"id": "8"}}`))
	_, err = console.pool.Exec(ctx, other)
	require.NoError(t, err)
	produced := ids(t, console.pool, `SELECT id FROM switchyard.outbox WHERE payload->>'event' = 'evt_ship' ORDER BY id`)
	require.Len(t, produced, 2, "the function enqueued two messages")
	var event int64
	require.NoError(t, console.pool.QueryRow(ctx, `SELECT id FROM switchyard.inbox_events WHERE source = 'ship' AND event_id = 'evt_ship'`).Scan(&event))
	require.Equal(t, produced, ids(t, console.pool, `SELECT outbox_id FROM switchyard.inbox_event_messages WHERE inbox_event_id = $1 ORDER BY outbox_id`, event),
		"the event is linked to the function's messages and no other")

	_, err = page.Goto(fmt.Sprintf("/inbox/events/%d", event))
	require.NoError(t, err)
	topics := make([]string, len(produced))
	for i, id := range produced {
		require.NoError(t, console.pool.QueryRow(ctx, `SELECT topic FROM switchyard.outbox WHERE id = $1`, id).Scan(&topics[i]))
	}
	require.ElementsMatch(t, []string{"order.packed", "order.shipped"}, topics)
	caused := page.GetByTestId("event-follow-through").GetByTestId("event-message")
	require.NoError(t, expect.Locator(caused).ToHaveCount(len(produced)))
	require.NoError(t, expect.Locator(caused).ToContainText(topics))
	require.NoError(t, expect.Locator(caused.GetByTestId("event-message-state")).ToHaveText([]string{"pending", "pending"}))
	for i, id := range produced {
		require.NoError(t, expect.Locator(caused.Nth(i).GetByTestId("event-message-link")).ToHaveAttribute("href", fmt.Sprintf("/messages/%d", id)))
	}
	screenshotWidths(t, page, "inbox-event-sql-follow-through")
	for i, id := range produced {
		if i > 0 {
			_, err = page.GoBack()
			require.NoError(t, err)
		}
		require.NoError(t, caused.Nth(i).GetByTestId("event-message-link").Click())
		require.NoError(t, expect.Page(page).ToHaveURL(fmt.Sprintf("%s/messages/%d", console.URL, id)))
		require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText(fmt.Sprintf("Message %d", id)))
		require.NoError(t, expect.Locator(page.GetByTestId("message-fields")).ToContainText(topics[i]))
	}
}

// screenshotWidths takes name's screenshot at each of widths, then leaves
// the page at the first.
func screenshotWidths(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	for _, w := range widths {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		screenshot(t, page, name+"-"+w.name)
	}
	require.NoError(t, page.SetViewportSize(widths[0].width, widths[0].height))
}
