package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// hostile is a payload whose strings would run script or send requests if
// the page rendered them as HTML.
const hostile = `{"note": "<img src=x onerror=alert(1)>", "html": "<script>alert(1)</script>",
	"attr": "<div hx-get=\"/x\" hx-trigger=\"load\">x</div>"}`

// pagesFixture is the data the page tests browse: 60 messages (ids 1..60,
// every tenth dead in one error group, ids 55..60 pending), message 61
// with a hostile payload and headers, its attempts, the group's trend and
// a blocked aggregate.
type pagesFixture struct {
	console *consoletest.Process
	pool    *pgxpool.Pool
	hostile int64
	key     string // message 61's message id
}

const fixtureGroup = "00000000000000aa"

func startPagesFixture(t *testing.T) pagesFixture {
	t.Helper()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	// No dispatcher: the fixture's states must stay as written.
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"}, "--workers", "0")
	t.Cleanup(func() { p.Stop(t) })
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for _, stmt := range []string{
		`INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function'), ('billing', 'function')`,
		`INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload, state, attempts,
			last_error, error_fingerprint, created_at, finished_at)
		SELECT CASE WHEN i % 2 = 0 THEN 'order.paid' ELSE 'order.created' END,
			CASE WHEN i % 3 = 0 THEN 'billing' ELSE 'shop' END, 'order', (i % 5)::text,
			jsonb_build_object('order_id', i),
			CASE WHEN i % 10 = 0 THEN 'dead' WHEN i >= 55 THEN 'pending' ELSE 'delivered' END,
			CASE WHEN i % 10 = 0 THEN 3 ELSE 1 END,
			CASE WHEN i % 10 = 0 THEN 'HTTP 503 from shop: upstream unavailable' END,
			CASE WHEN i % 10 = 0 THEN '` + fixtureGroup + `' END,
			now() - (70 - i) * interval '1 minute',
			CASE WHEN i < 55 OR i % 10 = 0 THEN now() END
		FROM generate_series(1, 60) AS i`,
		`INSERT INTO switchyard.outbox (topic, destination, payload, headers, state, attempts, last_error, error_fingerprint, finished_at, replay_of)
		VALUES ('order.noted', 'shop', '` + hostile + `', '{"x-note": "<b hx-get=\"/x\">bold</b>"}', 'dead', 2,
			'<img src=x onerror=alert(1)>', '` + fixtureGroup + `', now(), 50)`,
		`INSERT INTO switchyard.outbox_attempts (message_id, attempt, worker, lease_version, started_at, finished_at, outcome, applied, status_code, error, duration_ms)
		VALUES (61, 1, 'worker-a', 1, now(), now(), 'retry', true, 503, 'HTTP 503', 12.5),
		       (61, 2, 'worker-b', 2, now(), now(), 'dead', false, 400, '<script>alert(1)</script>', 8)`,
		`INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, sample_error, destinations)
		VALUES ('` + fixtureGroup + `', 7, now() - interval '1 hour', now(), 61, 'HTTP 503 from shop: upstream unavailable', '{shop,billing}')`,
		`INSERT INTO switchyard.dead_letter_hours (fingerprint, hour, dead)
		VALUES ('` + fixtureGroup + `', date_trunc('hour', now()) - interval '2 hours', 2), ('` + fixtureGroup + `', date_trunc('hour', now()), 5)`,
		`INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		VALUES ('shop', 'order', '0', 50)`,
	} {
		_, err := pool.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	f := pagesFixture{console: p, pool: pool, hostile: 61}
	require.NoError(t, pool.QueryRow(ctx, `SELECT message_id::text FROM switchyard.outbox WHERE id = 61`).Scan(&f.key))
	return f
}

// The message list shows real rows newest first, pages by keyset both
// ways, and keeps its filters in the URL across a reload.
func TestMessagesListPagesAndFiltersSurviveReload(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	page := newPage(t, f.console.URL)
	expect := newExpect()

	_, err := page.Goto("/messages")
	require.NoError(t, err)
	rows := page.GetByTestId("message-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(50))
	require.NoError(t, expect.Locator(rows.First().Locator("td").First()).ToHaveText("61"))
	screenshot(t, page, "messages-list")

	require.NoError(t, page.GetByTestId("page-older").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(f.console.URL+"/messages?before=12"))
	require.NoError(t, expect.Locator(rows).ToHaveCount(11))
	require.NoError(t, expect.Locator(rows.First().Locator("td").First()).ToHaveText("11"))
	require.NoError(t, page.GetByTestId("page-newer").Click())
	require.NoError(t, expect.Locator(rows).ToHaveCount(50))
	require.NoError(t, expect.Locator(rows.First().Locator("td").First()).ToHaveText("61"))

	_, err = page.GetByTestId("filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"dead"}})
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("filter-destination").Fill("shop"))
	require.NoError(t, page.GetByTestId("filter-apply").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/messages\?state=dead&.*destination=shop`)))
	// Dead and to shop: 10, 20, 40, 50 and 61.
	require.NoError(t, expect.Locator(rows).ToHaveCount(5))
	_, err = page.Reload()
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("filter-state")).ToHaveValue("dead"))
	require.NoError(t, expect.Locator(page.GetByTestId("filter-destination")).ToHaveValue("shop"))
	require.NoError(t, expect.Locator(rows).ToHaveCount(5))
	require.NoError(t, expect.Locator(rows.Locator(".badge.bad")).ToHaveCount(5))
	screenshot(t, page, "messages-filtered")

	// By idempotency key: exactly that message.
	_, err = page.Goto("/messages?id=" + url.QueryEscape(f.key))
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows).ToHaveCount(1))
	require.NoError(t, expect.Locator(rows.First().Locator("td").First()).ToHaveText("61"))
}

// The delivered list shows the latest delivery first, not the highest id,
// with each message's delivery time; the same state under a topic filter
// is in id order again, without that column.
func TestDeliveredListShowsTheLatestDeliveryFirst(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	// Message 3 delivered after every other; 54 and 53 before every other.
	_, err := f.pool.Exec(context.Background(), `UPDATE switchyard.outbox SET finished_at = CASE id
		WHEN 3 THEN now() + interval '1 minute' ELSE now() - interval '1 minute' END WHERE id IN (3, 53, 54)`)
	require.NoError(t, err)
	page := newPage(t, f.console.URL)
	expect := newExpect()

	// The "N new" control asks once when the stream is ready: nothing was
	// delivered after message 3, although 46 delivered ids are above it.
	first, err := page.ExpectResponse(regexp.MustCompile(`/messages/new\?.*above=3`), func() error {
		_, err := page.Goto("/messages?state=delivered")
		return err
	})
	require.NoError(t, err)
	askedAt, err := page.Evaluate(`() => Date.now()`) // the browser's clock, at or after that ask
	require.NoError(t, err)
	// The answer itself, not the DOM, which may not have taken it yet.
	body, err := first.Text()
	require.NoError(t, err)
	require.NotContains(t, body, "new-messages-link", "a count above the first row's delivery")
	newLink := page.GetByTestId("new-messages-link")
	require.NoError(t, expect.Locator(newLink).ToHaveCount(0))
	rows := page.GetByTestId("message-row")
	// Delivered: 1..54 but the five dead (10, 20, ..., 50).
	require.NoError(t, expect.Locator(rows).ToHaveCount(49))
	require.NoError(t, expect.Locator(page.GetByTestId("messages-order")).ToHaveText("The latest delivery first."))
	require.NoError(t, expect.Locator(page.GetByTestId("message-table").Locator("th").Last()).ToHaveText("Delivered (UTC)"))
	ids := []string{"3", "52", "51", "49"} // then the others by id, down to 1; 54 and 53 last
	for i, id := range ids {
		require.NoError(t, expect.Locator(rows.Nth(i).Locator("td").First()).ToHaveText(id))
	}
	require.NoError(t, expect.Locator(rows.Nth(47).Locator("td").First()).ToHaveText("54"))
	require.NoError(t, expect.Locator(rows.Last().Locator("td").First()).ToHaveText("53"))
	require.NoError(t, expect.Locator(rows.First().GetByTestId("message-delivered-at")).ToHaveText(regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)))
	// No last error (a delivery clears it): the table fits a laptop's
	// screen whole, without scrolling inside its box.
	require.NoError(t, expect.Locator(page.GetByTestId("message-table").Locator("th")).ToHaveText(
		[]string{"ID", "State", "Topic", "Destination", "Aggregate", "Attempts", "Created (UTC)", "Delivered (UTC)"}))
	require.NoError(t, page.SetViewportSize(1280, 800))
	requireLayout(t, page, "/messages?state=delivered", 1280)
	inside, err := page.Evaluate(scrollsInside)
	require.NoError(t, err)
	require.Empty(t, inside, "/messages?state=delivered at 1280 px: tables scrolling inside their box")
	screenshot(t, page, "messages-delivered")

	// An enqueue changes the statistics but delivers nothing: its stats
	// event does not make the control ask (the list is ordered by
	// delivery, and the latest delivery did not move). The page counts
	// the control's requests as htmx starts them, in the task of the event
	// that made them; and the enqueue waits until a second has passed
	// since the last ask, so that an ask would go out at once, not held
	// back by the control's limit of one a second (messages.js) past the
	// count below.
	_, err = page.Evaluate(`() => {
		window.newestSeen = 0;
		window.newAsks = 0;
		document.body.addEventListener("htmx:confirm", (e) => {
			const t = e.detail.triggeringEvent;
			if (t && t.type === "sse:stats") {
				window.newestSeen = Math.max(window.newestSeen, JSON.parse(t.detail.data).payload.newest_outbox_id);
			}
		});
		document.body.addEventListener("htmx:beforeRequest", (e) => {
			if (e.detail.elt.dataset.testid === "new-messages") window.newAsks++;
		});
	}`)
	require.NoError(t, err)
	_, err = page.WaitForFunction(`(at) => Date.now() >= at + 1000`, askedAt)
	require.NoError(t, err)
	var enqueued int64
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.created', 'shop', '{}') RETURNING id`).Scan(&enqueued))
	_, err = page.WaitForFunction(`(id) => window.newestSeen >= id`, enqueued)
	require.NoError(t, err, "no stats event after the enqueue")
	asks, err := page.Evaluate(`() => window.newAsks`)
	require.NoError(t, err)
	require.EqualValues(t, 0, asks, "the delivered list asked after an enqueue that delivered nothing")

	// Message 2 delivered again later (as a test's write): the stats event
	// of that delivery alone makes the control ask, and it counts one new
	// delivery, below the first row's id.
	_, err = page.ExpectResponse(regexp.MustCompile(`/messages/new\?.*above=3`), func() error {
		_, err := f.pool.Exec(context.Background(), `UPDATE switchyard.outbox SET finished_at = now() + interval '2 minutes' WHERE id = 2`)
		return err
	})
	require.NoError(t, err)
	asks, err = page.Evaluate(`() => window.newAsks`)
	require.NoError(t, err)
	require.EqualValues(t, 1, asks, "asks since the enqueue: the delivery's only")
	require.NoError(t, expect.Locator(newLink).ToHaveText("1 new message: show"))
	require.NoError(t, newLink.Click())
	require.NoError(t, expect.Locator(rows.First().Locator("td").First()).ToHaveText("2"))

	_, err = page.Goto("/messages?state=delivered&topic=order.paid")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows.First().Locator("td").First()).ToHaveText("54"))
	require.NoError(t, expect.Locator(page.GetByTestId("messages-order")).ToHaveCount(0))
	require.NoError(t, expect.Locator(page.GetByTestId("message-delivered-at")).ToHaveCount(0))
}

// A hostile payload, header and error render as inert text: no dialog, no
// element from the payload, no request to /x; the raw payload downloads as
// an attachment.
func TestMessageDetailRendersHostileTextInert(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	page := newPage(t, f.console.URL)
	expect := newExpect()
	page.OnDialog(func(d playwright.Dialog) {
		t.Errorf("a dialog opened: %q", d.Message())
		_ = d.Dismiss()
	})
	page.OnRequest(func(r playwright.Request) {
		if u, err := url.Parse(r.URL()); err == nil && (u.Path == "/x" || strings.HasSuffix(u.Path, "/x")) {
			t.Errorf("the page requested %s", r.URL())
		}
	})

	// The deep link by idempotency key lands on the message.
	_, err := page.Goto("/m/" + f.key)
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(fmt.Sprintf("%s/messages/%d", f.console.URL, f.hostile)))
	payload := page.GetByTestId("payload")
	require.NoError(t, expect.Locator(payload).ToContainText("<img src=x onerror=alert(1)>"))
	require.NoError(t, expect.Locator(payload).ToContainText("<script>alert(1)</script>"))
	require.NoError(t, expect.Locator(payload).ToContainText(`hx-get=\"/x\"`))
	require.NoError(t, expect.Locator(page.Locator("main img, main script, main [hx-get='/x']")).ToHaveCount(0))
	require.NoError(t, expect.Locator(page.GetByTestId("headers")).ToContainText(`<b hx-get="/x">bold</b>`))
	require.NoError(t, expect.Locator(page.GetByTestId("attempt-row")).ToHaveCount(2))
	require.NoError(t, expect.Locator(page.GetByTestId("attempt-row").Nth(1)).ToContainText("fenced"))
	require.NoError(t, expect.Locator(page.GetByTestId("replay-of")).ToHaveAttribute("href", "/messages/50"))
	screenshot(t, page, "message-detail")

	download, err := page.ExpectDownload(func() error { return page.GetByTestId("payload-download").Click() })
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("message-%d.json", f.hostile), download.SuggestedFilename())
	resp, err := page.Request().Get(fmt.Sprintf("%s/messages/%d/payload", f.console.URL, f.hostile))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status())
	h := resp.Headers()
	require.True(t, strings.HasPrefix(h["content-disposition"], "attachment"), h["content-disposition"])
	require.Equal(t, "application/json", h["content-type"])
	require.Equal(t, "nosniff", h["x-content-type-options"])

	// The aggregate's other messages, linked from a dead one.
	_, err = page.Goto("/messages/50")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("aggregate").GetByTestId("message-row")).ToHaveCount(10))
	require.NoError(t, expect.Locator(page.GetByTestId("lineage").GetByTestId("message-row")).ToHaveCount(1))
}

// The dead-letter list shows its group with a trend, and a group that
// appears in the database shows up without a reload, through the change
// feed and the live stream; the group and blocked-aggregate pages render.
func TestDeadLetterGroupAppearsLive(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	page := newPage(t, f.console.URL)
	expect := newExpect()
	ctx := context.Background()

	// The region refreshes once when the live stream is ready: after that
	// response, only a live event can bring the new group.
	_, err := page.ExpectResponse(regexp.MustCompile(`/dead-letters/groups$`), func() error {
		_, err := page.Goto("/dead-letters")
		return err
	})
	require.NoError(t, err)
	groups := page.GetByTestId("dead-letter-group")
	require.NoError(t, expect.Locator(groups).ToHaveCount(1))
	require.NoError(t, expect.Locator(groups.First().GetByTestId("group-dead")).ToHaveText("7"))
	require.NoError(t, expect.Locator(groups.First().Locator("svg.spark polyline")).ToHaveCount(1))
	_, err = page.Evaluate(`() => { window.notReloaded = true }`)
	require.NoError(t, err)

	for _, stmt := range []string{
		`INSERT INTO switchyard.outbox (topic, destination, payload, state, attempts, last_error, error_fingerprint, finished_at)
		VALUES ('order.paid', 'billing', '{}', 'dead', 1, 'HTTP 400 from billing: bad request', '00000000000000bb', now())`,
		`WITH g AS (
			INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, sample_error, destinations)
			SELECT '00000000000000bb', 1, now(), now(), max(id), 'HTTP 400 from billing: bad request', '{billing}' FROM switchyard.outbox
			RETURNING fingerprint)
		INSERT INTO switchyard.changes (kind, subject, payload) SELECT 'dead_letter', fingerprint, '{"dead": 1}' FROM g`,
		`SELECT pg_notify('switchyard_changes', '')`,
	} {
		_, err := f.pool.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	require.NoError(t, expect.Locator(groups).ToHaveCount(2))
	require.NoError(t, expect.Locator(groups.First().GetByTestId("group-link")).ToHaveText("00000000000000bb"))
	still, err := page.Evaluate(`() => window.notReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, still, "the page was reloaded")
	screenshot(t, page, "dead-letters")

	require.NoError(t, groups.Nth(1).GetByTestId("group-link").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(f.console.URL+"/dead-letters/"+fixtureGroup))
	require.NoError(t, expect.Locator(page.GetByTestId("message-row")).ToHaveCount(7))
	screenshot(t, page, "dead-letter-group")

	_, err = page.Goto("/dead-letters")
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("blocked-link").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(f.console.URL+"/aggregates/blocked"))
	blocked := page.GetByTestId("blocked-row")
	require.NoError(t, expect.Locator(blocked).ToHaveCount(1))
	require.NoError(t, expect.Locator(blocked.GetByTestId("blocked-waiting")).ToHaveText("1"))
	require.NoError(t, expect.Locator(blocked.GetByTestId("dead-head")).ToHaveAttribute("href", "/messages/50"))
	screenshot(t, page, "blocked-aggregates")
}
