package e2e

import (
	"context"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/consoletest"
)

// TestDashboardSaysWhyAndLinksEverything (issue 14, item 9): during an
// outage the dashboard's status line says Failing and why (the open
// breaker, the new dead letters, counted as in the database), each reason
// and figure links to the list behind it, and the breakers and
// dispatchers are in view without scrolling at 1400×900.
func TestDashboardSaysWhyAndLinksEverything(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDatabase(t)
	ctx := context.Background()
	// refusing: every message dead at its first attempt, the breaker never
	// opens; tripping: its breaker opens after 3 failures and stays open.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, max_attempts, breaker_min_requests, breaker_open_ms)
		VALUES ('refusing', 'webhook', 'http://127.0.0.1:9/', 1, 1000, 1000),
		       ('tripping', 'webhook', 'http://127.0.0.1:9/', 50, 3, 600000)`)
	require.NoError(t, err)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"})
	t.Cleanup(func() { console.Stop(t) })
	enqueue(t, pool, "refusing", 5)
	enqueue(t, pool, "tripping", 5)

	page := newPageWith(t, console.URL, nil, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1400, Height: 900}})
	expect := newExpect()
	_, err = page.Goto("/")
	require.NoError(t, err)
	long := playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(30000)}
	require.NoError(t, expect.Locator(page.GetByTestId("dash-status-level")).ToHaveText("Failing", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	require.NoError(t, expect.Locator(page.GetByTestId("dash-status")).ToContainText("breaker open for tripping", long))
	var dead int
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'refusing' AND state = 'dead'`).Scan(&dead) == nil && dead == 5
	}, 30*time.Second, 50*time.Millisecond, "the refusing destination's messages die")
	reason := page.GetByTestId("dash-status-reason").Filter(playwright.LocatorFilterOptions{HasText: "new dead letters"})
	require.NoError(t, expect.Locator(reason).ToHaveText(strconv.Itoa(dead)+" new dead letters in the last 5 min", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	require.NoError(t, expect.Locator(reason).ToHaveAttribute("href", "/dead-letters"))
	open := page.GetByTestId("dash-status-reason").Filter(playwright.LocatorFilterOptions{HasText: "breaker open"})
	require.NoError(t, expect.Locator(open).ToHaveAttribute("href", "/messages?destination=tripping&state=pending"))

	// Breakers and dispatchers in view without scrolling.
	for _, id := range []string{"breakers", "dispatchers"} {
		require.NoError(t, expect.Locator(page.GetByTestId(id)).ToBeVisible(), id)
		// Measured in one script run: a live refresh swaps the region in
		// between two protocol calls (visible, then gone for the
		// BoundingBox), never within one task of the page.
		bottom, err := page.Evaluate(`id => {
			const e = document.querySelector('[data-testid="' + id + '"]');
			return e ? e.getBoundingClientRect().bottom : -1;
		}`, id)
		require.NoError(t, err)
		b, ok := bottom.(float64)
		if !ok { // a whole number of pixels comes back as an int
			n, isInt := bottom.(int)
			require.True(t, isInt, "%s: bottom %v", id, bottom)
			b = float64(n)
		}
		require.Greater(t, b, 0.0, "%s is on the page", id)
		require.LessOrEqual(t, b, 900.0, "%s ends below the fold at 1400×900", id)
	}
	screenshot(t, page, "dashboard-status-failing")

	// Every tile links to its list; the dead tile's figure is the list's.
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead")).ToHaveAttribute("href", "/dead-letters"))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-pending")).ToHaveAttribute("href", "/messages?stage=queued"))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-in-flight")).ToHaveAttribute("href", "/messages?stage=in_flight"))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-lag")).ToHaveAttribute("href", "/messages?state=pending"))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-blocked")).ToHaveAttribute("href", "/aggregates/blocked"))
	// The dispatcher's leases link to the messages it holds
	// (TestDashboardShowsDeliveriesBreakersAndDispatchers follows one).
	var owner string
	require.NoError(t, pool.QueryRow(ctx, `SELECT owner FROM switchyard.dispatchers WHERE stopped_at IS NULL`).Scan(&owner))
	leases := page.GetByTestId("dispatchers").GetByTestId("dispatcher-leases")
	require.NoError(t, expect.Locator(leases).ToHaveCount(1))
	require.NoError(t, expect.Locator(leases).ToHaveAttribute("href", "/messages?"+url.Values{"leased_by": {owner}}.Encode()))
	// The Retrying tile's figure is the list behind it: tripping's
	// messages that failed and wait, their breaker open.
	retrying := `FROM switchyard.outbox WHERE state = 'pending' AND lease_owner IS NULL AND attempts > 0`
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) `+retrying) > 0 && count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE lease_owner IS NOT NULL`) == 0
	}, 30*time.Second, 50*time.Millisecond, "tripping's failed messages wait behind the open breaker")
	waiting := ids(t, pool, `SELECT id `+retrying+` ORDER BY id DESC`)
	tile := page.GetByTestId("stat-retrying")
	require.NoError(t, expect.Locator(tile.GetByTestId("stat-retrying-value")).ToHaveText(strconv.Itoa(len(waiting)), playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	require.NoError(t, tile.Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/messages\?stage=retrying$`)))
	for i, id := range waiting {
		require.NoError(t, expect.Locator(page.GetByTestId("message-row").Nth(i).Locator("td").First()).ToHaveText(strconv.FormatInt(id, 10)))
	}
	require.NoError(t, expect.Locator(page.GetByTestId("message-row")).ToHaveCount(len(waiting)))
	require.NoError(t, expect.Locator(page.GetByTestId("filter-stage")).ToHaveValue("retrying"))
	screenshot(t, page, "messages-stage-retrying")
	_, err = page.GoBack()
	require.NoError(t, err)
	flowDead := page.GetByTestId("flows").Locator("tr", playwright.LocatorLocatorOptions{HasText: "refusing"}).Locator("a[href*='state=dead']")
	require.NoError(t, expect.Locator(flowDead).ToHaveText(strconv.Itoa(dead), playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	dead = refreshKeepsElements(t, page, pool, flowDead, dead)
	require.NoError(t, flowDead.Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/messages\?destination=refusing&state=dead&topic=order.created$`)))
	require.NoError(t, expect.Locator(page.GetByTestId("message-row")).ToHaveCount(dead))
}

// refreshKeepsElements expects the dashboard's live refresh to merge the
// new figures into the elements already there, never to replace them: a
// link being clicked, hovered or focused when a refresh lands must stay
// the one under the pointer (CI once clicked a flow link that an
// innerHTML refresh had just detached), and the charts (hx-preserve) keep
// their canvas and keep being updated. flowDead is refusing's dead-count
// link showing dead; two more of refusing's messages die, and the same
// element must show the new count, still connected and focused. It
// returns the new count.
func refreshKeepsElements(t *testing.T, page playwright.Page, pool *pgxpool.Pool, flowDead playwright.Locator, dead int) int {
	t.Helper()
	expect := newExpect()
	// Focused in the same task of the page that finds it: with a backlog
	// the figures change, and the region refreshes, every second.
	focused, err := flowDead.EvaluateHandle("e => { e.focus(); return e; }", nil)
	require.NoError(t, err)
	link := focused.AsElement()
	require.NotNil(t, link, "the flow link's handle is an element's")
	canvas, err := page.Locator("#chart-throughput canvas").EvaluateHandle("e => e", nil)
	require.NoError(t, err)
	// The legend shows the newest second of the series (dashboard.js,
	// showLatest): a newer snapshot moves it.
	newest := page.Locator("#chart-throughput .u-legend .u-series").First().Locator(".u-value")
	before, err := newest.TextContent()
	require.NoError(t, err)

	enqueue(t, pool, "refusing", 2)
	dead += 2
	require.NoError(t, expect.Locator(flowDead).ToHaveText(strconv.Itoa(dead), playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	for _, c := range []struct {
		script string
		want   any
	}{
		{"e => e.isConnected", true},
		{"e => e.textContent", strconv.Itoa(dead)},
		{"e => document.activeElement === e", true},
	} {
		got, err := link.Evaluate(c.script)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "the flow link after a refresh: %s", c.script)
	}
	connected, err := canvas.Evaluate("e => e.isConnected")
	require.NoError(t, err)
	require.Equal(t, true, connected, "the throughput chart's canvas was replaced by a refresh")
	require.NoError(t, expect.Locator(newest).Not().ToHaveText(before), "the chart was not updated by the refresh")
	return dead
}

// TestDashboardChartsInUTCWithLatestValues (issue 14, item 12): in a
// browser whose time zone is not UTC, the charts' legends show the time
// as every page does (UTC, 2006-01-02 15:04:05) and the latest values,
// without hovering.
func TestDashboardChartsInUTCWithLatestValues(t *testing.T) {
	t.Parallel()
	console, pool := startConsoleDB(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO switchyard.destinations (name, kind, address, max_attempts, breaker_min_requests)
		VALUES ('refusing', 'webhook', 'http://127.0.0.1:9/', 1, 1000)`)
	require.NoError(t, err)
	page := newPageWith(t, console.URL, nil, playwright.BrowserNewContextOptions{TimezoneId: playwright.String("Pacific/Kiritimati")})
	expect := newExpect()
	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("dash-asof")).ToContainText("As of"))
	enqueue(t, pool, "refusing", 3)
	legend := page.Locator("#chart-throughput .u-legend .u-series")
	when := legend.Nth(0).Locator(".u-value")
	dead := legend.Nth(3).Locator(".u-value")
	require.NoError(t, expect.Locator(dead).Not().ToHaveText("--", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	require.NoError(t, expect.Locator(when).ToHaveText(regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)))
	shown, err := when.TextContent()
	require.NoError(t, err)
	var utc string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24')`).Scan(&utc))
	require.Contains(t, shown, utc, "the legend's time is UTC, not the browser's zone (UTC+14)")
	asOf, err := page.GetByTestId("dash-asof").TextContent()
	require.NoError(t, err)
	require.Contains(t, asOf, "UTC")
	screenshot(t, page, "dashboard-charts-utc")
}

// TestAuditShowsEveryActionLinksTargetsAndModes (issue 14, item 11): the
// action filter lists the actions the trail holds (also one the console
// does not know), a target links to what it names, a re-apply shows its
// mode and the replay it created, a bulk job its filter, and times read
// like every other page's.
func TestAuditShowsEveryActionLinksTargetsAndModes(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	_, err := f.pool.Exec(context.Background(), `INSERT INTO switchyard.audit_log (actor, action, target, reason, outcome, request_id, remote_addr, detail, prev_hash, hash)
		VALUES ('alice', 'message.replay', 'message 50', 'fixed the endpoint', 'ok', 'r1', '127.0.0.1', '{"mode": "reapply", "replay_id": 61}', '', ''),
		       ('bob', 'replay_job.start', 'replay job 0190a5a4-1d2e-7c3b-9f00-0123456789ab', 'outage over', 'ok', 'r2', '127.0.0.1',
		        '{"mode": "redeliver", "filter": {"fingerprint": "`+fixtureGroup+`"}}', '', ''),
		       ('carol', 'custom.thing', 'something', '', 'ok', 'r3', '127.0.0.1', '{}', '', '')`)
	require.NoError(t, err)
	page := newPage(t, f.console.URL)
	expect := newExpect()
	_, err = page.Goto("/audit")
	require.NoError(t, err)
	options := page.GetByTestId("audit-action").Locator("option")
	for _, a := range []string{"message.replay", "replay_job.start", "custom.thing", "message.discard", "login"} {
		require.NoError(t, expect.Locator(options.Filter(playwright.LocatorFilterOptions{HasText: a})).ToHaveCount(1), a)
	}
	rows := page.GetByTestId("audit-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(3))
	replay := rows.Filter(playwright.LocatorFilterOptions{HasText: "message.replay"})
	require.NoError(t, expect.Locator(replay.GetByTestId("audit-mode")).ToHaveText("re-apply"))
	require.NoError(t, expect.Locator(replay.GetByTestId("audit-target")).ToHaveAttribute("href", "/messages/50"))
	require.NoError(t, expect.Locator(replay.GetByTestId("audit-replay")).ToHaveAttribute("href", "/messages/61"))
	require.NoError(t, expect.Locator(replay.Locator("td").First()).ToHaveText(regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)))
	job := rows.Filter(playwright.LocatorFilterOptions{HasText: "replay_job.start"})
	require.NoError(t, expect.Locator(job.GetByTestId("audit-mode")).ToHaveText("redeliver"))
	require.NoError(t, expect.Locator(job.GetByTestId("audit-filter")).ToContainText(fixtureGroup))
	require.NoError(t, expect.Locator(job.GetByTestId("audit-target")).ToHaveAttribute("href", "/replays#job-0190a5a4-1d2e-7c3b-9f00-0123456789ab"))
	screenshot(t, page, "audit-actions")

	_, err = page.GetByTestId("audit-action").SelectOption(playwright.SelectOptionValues{Values: &[]string{"custom.thing"}})
	require.NoError(t, err)
	require.NoError(t, page.GetByRole(*playwright.AriaRoleButton, playwright.PageGetByRoleOptions{Name: "Filter"}).Click())
	require.NoError(t, expect.Locator(rows).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("audit-action")).ToHaveValue("custom.thing"))
}

// TestSignInSaysHowToCreateTheFirstAdmin (issue 14, item 18): a console
// without any account tells the visitor on this machine how to create
// the first admin; once one exists, the page no longer does.
func TestSignInSaysHowToCreateTheFirstAdmin(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDatabase(t)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL})
	t.Cleanup(func() { console.Stop(t) })
	page := newPage(t, console.URL)
	expect := newExpect()
	_, err := page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/login`)))
	hint := page.GetByTestId("login-first-admin")
	require.NoError(t, expect.Locator(hint).ToContainText("No account exists yet"))
	require.NoError(t, expect.Locator(hint).ToContainText("console user add --role admin NAME"))
	for _, w := range widths {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		problems, err := page.Evaluate(layoutProblems)
		require.NoError(t, err)
		require.Empty(t, problems, "/login at %d px", w.width)
		screenshot(t, page, "width-"+w.name+"-login-first-admin")
	}

	require.NoError(t, e2eAuth(pool, auth.Config{}).AddUser(context.Background(), auth.CLI, "alice", auth.Admin, e2ePassword))
	_, err = page.Reload()
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("login-form")).ToBeVisible())
	require.NoError(t, expect.Locator(hint).ToHaveCount(0))
}
