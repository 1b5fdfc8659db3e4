package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// startConsoleDB is startConsole that also returns a pool on the console's
// database, for tests that change data under a page.
func startConsoleDB(t *testing.T, args ...string) (*consoletest.Process, *pgxpool.Pool) {
	t.Helper()
	dbURL, pool := newDatabase(t)
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"}, args...)
	t.Cleanup(func() { p.Stop(t) })
	return p, pool
}

// newDatabase is a test database of its own and a pool on it, for data
// written before a console starts on it.
func newDatabase(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return dbURL, pool
}

// enqueue writes n messages for destination through the public contract:
// one INSERT into switchyard.outbox.
func enqueue(t *testing.T, pool *pgxpool.Pool, destination string, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 'order.created', $1, jsonb_build_object('n', g) FROM generate_series(1, $2) g`, destination, n)
	require.NoError(t, err)
}

// TestDashboardCountsLiveAndConverges opens the dashboard, enqueues
// messages and expects the pending counter to change within a second
// without a reload; then it kills the console's LISTEN connection while
// more messages are enqueued and expects the page to converge. At the
// end, at each of widths, no tile's label takes two lines.
func TestDashboardCountsLiveAndConverges(t *testing.T) {
	t.Parallel()
	console, pool := startConsoleDB(t)
	ctx := context.Background()
	// Disabled, so the dispatcher builds no route for it and its messages
	// stay pending whenever the destinations reload: the count is exact.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, disabled) VALUES ('e2e-hook', 'webhook', 'http://127.0.0.1:9/', true)`)
	require.NoError(t, err)
	page := newPage(t, console.URL)
	expect := newExpect()

	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveTitle("Dashboard · Switchyard"))
	require.NoError(t, expect.Locator(page.GetByTestId("dash-asof")).ToContainText("As of"))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-pending-value")).ToHaveText("0"))
	_, err = page.Evaluate(`() => { window.e2eNoReload = true; }`)
	require.NoError(t, err)

	enqueue(t, pool, "e2e-hook", 3)
	// Live, without a reload (e2eNoReload). How fast is the benches'
	// business (console bench sse and viewers); under the whole suite on
	// 2 cores a stats tick can take over a second, so the bound is loose.
	require.NoError(t, expect.Locator(page.GetByTestId("stat-pending-value")).ToHaveText("3"),
		"the pending counter did not change within 5 s of the enqueue")
	require.NoError(t, expect.Locator(page.GetByTestId("flows")).ToContainText("e2e-hook"))

	// Cut the live pipeline: the console's one LISTEN connection.
	var killed int
	err = pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE '%LISTEN' || ' switchyard%' AND pid <> pg_backend_pid()`).Scan(&killed)
	require.NoError(t, err)
	require.Equal(t, 1, killed, "exactly one LISTEN connection per console (change feed and dispatcher share it)")
	for range 4 {
		enqueue(t, pool, "e2e-hook", 1)
	}
	require.NoError(t, expect.Locator(page.GetByTestId("stat-pending-value")).ToHaveText("7"),
		"the page did not converge after the LISTEN connection was killed")

	// A hidden tab that becomes visible refreshes at once.
	enqueue(t, pool, "e2e-hook", 1)
	_, err = page.Evaluate(`() => document.dispatchEvent(new Event("visibilitychange"))`)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("stat-pending-value")).ToHaveText("8"))

	kept, err := page.Evaluate(`() => window.e2eNoReload === true`)
	require.NoError(t, err)
	require.Equal(t, true, kept, "the page reloaded")
	require.NoError(t, expect.Locator(page.Locator("#chart-throughput canvas")).ToHaveCount(1))
	// Every tile's label is one line at every width, so the figures line
	// up (at 390 px "Delivered 1 h" once broke before its "h", and at 800
	// px "Oldest pending" and "Blocked aggregates" took two lines).
	for _, w := range widths {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		wrapped, err := page.Evaluate(wrappedTileLabels)
		require.NoError(t, err)
		require.Empty(t, wrapped, "tile labels on two lines at %d px", w.width)
		screenshot(t, page, "dashboard-live-"+w.name)
	}
}

// wrappedTileLabels lists the dashboard's tile labels whose text takes
// more than one line.
const wrappedTileLabels = `async () => {
	` + settled + `
	return [...document.querySelectorAll(".tile-label")].filter((label) => {
		const text = document.createRange();
		text.selectNodeContents(label);
		return new Set([...text.getClientRects()].map((r) => Math.round(r.top))).size > 1;
	}).map((label) => label.textContent);
}`

// TestDashboardReadsFreshAfterItsStreamReconnectsDuringARead holds a read
// of the dashboard's region in flight while its stream reconnects and a
// statistics event follows at once: htmx queues only the last of those
// triggers, so the read sent next is the stats event's; it must still ask
// for a fresh snapshot (fresh=1), or the page could show a cached one
// from before what the lost stream missed (seen in CI:
// TestLivePagesConvergeAfterTheStreamIsCut, when the 10 s poll was in
// flight as the restarted console's stream came back).
func TestDashboardReadsFreshAfterItsStreamReconnectsDuringARead(t *testing.T) {
	t.Parallel()
	console, _ := startConsoleDB(t)
	page := newPage(t, console.URL)
	expect := newExpect()
	_, err := page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("dash-asof")).ToContainText("As of"))

	var mu sync.Mutex
	var released bool
	var after []string // the region's reads sent after the held one's answer was let go
	page.OnRequest(func(r playwright.Request) {
		mu.Lock()
		defer mu.Unlock()
		if released && strings.Contains(r.URL(), "/dashboard/live") {
			after = append(after, r.URL())
		}
	})
	const stats = `(v) => htmx.trigger("#dash-live", "sse:stats", { data: JSON.stringify({ payload: { version: v } }) })`
	held := holdAnswer(t, page, "/dashboard/live")
	_, err = page.Evaluate(stats, 1)
	require.NoError(t, err)
	held.arrived(t)
	_, err = page.Evaluate(`() => htmx.trigger("#dash-live", "sse:ready", { data: "" })`)
	require.NoError(t, err)
	_, err = page.Evaluate(stats, 1)
	require.NoError(t, err)
	mu.Lock()
	released = true
	mu.Unlock()
	held.release(t)
	testwait.Until(t, expectTimeout*time.Millisecond, "the queued read was sent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(after) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, after[0], "fresh=1", "the read after the stream's ready event, replaced in htmx's queue by a stats event's, asked for no fresh snapshot")
}

// TestDashboardShowsDeliveriesBreakersAndDispatchers lets the console's
// dispatcher deliver to a destination that always fails and expects the
// dashboard to show retries, dead letters, the open breaker and the
// dispatcher; then to one that never answers, and expects the
// dispatcher's leases to open exactly the messages it holds in flight
// (issue 14, item 9).
func TestDashboardShowsDeliveriesBreakersAndDispatchers(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDatabase(t)
	ctx := context.Background()
	// hanging answers nothing until the test ends: its deliveries stay in
	// flight, leased by the console's dispatcher.
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(release) })
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts, breaker_min_requests, breaker_open_ms, timeout_ms)
		VALUES ('refusing', 'webhook', 'http://127.0.0.1:9/', DEFAULT, 100, 200, 2, 3, 1000, 10000),
		       ('hanging', 'webhook', $1, 'E2E_HOOK_SECRET', 100, 200, 2, 3, 1000, 600000)`, hanging.URL)
	require.NoError(t, err)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true",
		"E2E_HOOK_SECRET=whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="})
	t.Cleanup(func() { console.Stop(t) })
	enqueue(t, pool, "refusing", 5)

	page := newPage(t, console.URL)
	expect := newExpect()
	_, err = page.Goto("/")
	require.NoError(t, err)
	long := playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(30000)}
	require.NoError(t, expect.Locator(page.GetByTestId("dispatchers")).ToContainText("running", long))
	// Two attempts each, then dead: all five, counted from the statistics.
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead-value")).ToHaveText("5", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	require.NoError(t, expect.Locator(page.GetByTestId("flows")).ToContainText("refusing", long))
	require.NoError(t, expect.Locator(page.GetByTestId("breakers")).ToContainText("refusing", long))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-delivered")).ToContainText("failure rate 100.0 %", long))
	screenshot(t, page, "dashboard-failures")

	// The dispatcher's leases: the figure is the database's, and its link
	// lists exactly the messages the dispatcher's workers hold.
	enqueue(t, pool, "hanging", 3)
	var owner string
	require.NoError(t, pool.QueryRow(ctx, `SELECT owner FROM switchyard.dispatchers WHERE stopped_at IS NULL`).Scan(&owner))
	leases := page.GetByTestId("dispatchers").Locator("tr", playwright.LocatorLocatorOptions{HasText: owner}).GetByTestId("dispatcher-leases")
	require.NoError(t, expect.Locator(leases).ToHaveText("3", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	// Leased on their rows, or first tries in a stretch (internal/outbox).
	held := ids(t, pool, `SELECT o.id FROM switchyard.outbox o WHERE o.state = 'pending' AND (o.lease_owner LIKE $1 || '/%'
		OR EXISTS (SELECT FROM switchyard.outbox_stretches s WHERE o.id = ANY (s.ids) AND s.owner LIKE $1 || '/%')) ORDER BY o.id DESC`, owner)
	require.Len(t, held, 3, "the dispatcher holds the hanging deliveries")
	screenshot(t, page, "dashboard-dispatcher-leases-held")
	require.NoError(t, leases.Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/messages\?leased_by=`+regexp.QuoteMeta(url.QueryEscape(owner))+`$`)))
	rows := page.GetByTestId("message-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(len(held)))
	for i, id := range held {
		require.NoError(t, expect.Locator(rows.Nth(i).Locator("td").First()).ToHaveText(strconv.FormatInt(id, 10)))
	}
	require.NoError(t, expect.Locator(page.GetByTestId("messages-total")).ToHaveText("3 messages"))
	require.NoError(t, expect.Locator(page.GetByTestId("filter-leased-by")).ToHaveValue(owner))
	screenshotWidths(t, page, "dashboard-dispatcher-leases")
	// Removed from the form, the filter is gone: every message again.
	require.NoError(t, page.GetByTestId("filter-leased-by").Fill(""))
	require.NoError(t, page.GetByTestId("filter-apply").Click())
	require.NoError(t, expect.Page(page).Not().ToHaveURL(regexp.MustCompile(`leased_by=[^&]`)))
	require.NoError(t, expect.Locator(rows).ToHaveCount(count(t, pool, `SELECT count(*) FROM switchyard.outbox`)))
}

// startDemo starts `console demo` on a fresh database, with env added to
// its environment, and returns it, ready, and the database's URL.
func startDemo(t *testing.T, env ...string) (*consoletest.Process, string) {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	addr := consoletest.FreeAddr(t)
	p := consoletest.Start(t, useSuite(t).binary, append([]string{"DATABASE_URL=" + dbURL}, env...), "demo", "--listen", addr)
	p.Addr, p.URL = addr, "http://"+addr
	p.WaitReady(t, time.Minute)
	t.Cleanup(func() { p.Stop(t) })
	return p, dbURL
}

// TestDemoRunsAndItsPanelChangesIt starts `console demo` and expects
// deliveries on the dashboard within seconds, then uses the panel.
func TestDemoRunsAndItsPanelChangesIt(t *testing.T) {
	t.Parallel()
	p, dbURL := startDemo(t)

	page := newPage(t, p.URL)
	expect := newExpect()
	_, err := page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("stat-delivered-value")).Not().ToHaveText("0"))
	require.NoError(t, expect.Locator(page.GetByTestId("inbox-sources")).ToContainText("demo-shop"))
	screenshot(t, page, "demo-dashboard")

	// The demo's signed webhooks are applied by its customer-upsert
	// handler, into the schema `console demo` created for itself.
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard_demo.customers`).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 50*time.Millisecond, "customers written by the demo's inbox handler")

	require.NoError(t, page.GetByTestId("demo-link").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(p.URL+"/demo"))
	require.NoError(t, page.Locator(`input[name="outage"]`).Check())
	require.NoError(t, page.GetByRole(*playwright.AriaRoleButton, playwright.PageGetByRoleOptions{Name: "Apply"}).Click())
	require.NoError(t, expect.Locator(page.GetByTestId("demo-saved")).ToBeVisible())
	require.NoError(t, expect.Locator(page.Locator(`input[name="outage"]`)).ToBeChecked())
	// Issue 14, item 15: the panel is the navigation's current entry.
	require.NoError(t, expect.Locator(page.GetByTestId("nav-demo")).ToHaveAttribute("aria-current", "page"))
	require.NoError(t, expect.Locator(page.GetByTestId("nav-dashboard")).Not().ToHaveAttribute("aria-current", "page"))
	screenshot(t, page, "demo-panel")

	// The demo admin is signed in, without a session: the Sessions page
	// must not say that nobody is.
	_, err = page.Goto("/sessions")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("empty-state")).ToContainText("signed in by demo mode"))
	require.NoError(t, expect.Locator(page.GetByTestId("empty-state")).Not().ToContainText("Nobody"))
}
