package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// widths are the viewports every page must work at: a wide screen, a
// laptop, a narrow window and a phone. The first is where tests that
// visit them all leave the page.
var widths = []struct {
	name          string
	width, height int
	collapsed     bool // the navigation is folded behind its Menu button
	whole         bool // every table fits its box: none scrolls inside it
}{
	{"1400", 1400, 900, false, true},
	{"1280", 1280, 800, false, true},
	{"800", 800, 900, false, false},
	{"390", 390, 844, true, false},
}

// settled waits for two animation frames: a viewport change fires the
// page's resize handlers (the dashboard's charts resize themselves) in the
// next frame's update, after SetViewportSize has returned.
const settled = `await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));`

// layoutProblems lists what is wrong with the page's layout at its
// width, once it has settled: a data table outside a .table-scroll box
// (the one place a wide table may scroll: without it, it would widen the
// page once its rows are long enough, whatever the fixture's are), the
// document scrolling sideways, and error text squeezed into a narrow
// column.
const layoutProblems = `async () => {
	` + settled + `
	const out = [];
	for (const table of document.querySelectorAll("main table.data")) {
		if (!table.parentElement.classList.contains("table-scroll")) {
			out.push("table " + (table.dataset.testid || table.closest("[id]")?.id || table.rows[0]?.textContent.trim().slice(0, 40)) + " is not in a .table-scroll box");
		}
	}
	const doc = document.documentElement;
	if (doc.scrollWidth > doc.clientWidth + 1) {
		// Name the first element past the window that no box around it
		// clips (what a box clips scrolls inside that box: fine).
		const clipped = (el) => {
			for (let box = el.parentElement; box.tagName !== "MAIN"; box = box.parentElement) {
				if (getComputedStyle(box).overflowX !== "visible") {
					return true;
				}
			}
			return false;
		};
		let first = "";
		for (const el of document.querySelectorAll("main *")) {
			const r = el.getBoundingClientRect();
			if (r.right > doc.clientWidth + 1 && !clipped(el) && !el.closest(".chart")) {
				first = el.tagName.toLowerCase() + "." + [...el.classList].join(".") + " (" + Math.round(r.right) + " px)";
				break;
			}
		}
		out.push("the page scrolls sideways: " + doc.scrollWidth + " > " + doc.clientWidth + " px; first overflowing: " + first);
	}
	for (const el of document.querySelectorAll(".error-cell, .error-text, td.wrap, .alert, [data-testid=error] h2")) {
		const r = el.getBoundingClientRect();
		if (el.textContent.trim().length > 24 && r.width > 0 && r.width < Math.min(160, doc.clientWidth - 40)) {
			out.push("error text squeezed to " + Math.round(r.width) + " px: " + el.textContent.trim().slice(0, 40));
		}
	}
	return out;
}`

// overflowProblems lists what scrolls where it must not, measured as the
// browser scrolls: the document sideways past the window, and a table
// past its card. A table may scroll sideways inside the nearest box
// around it that clips (its .table-scroll), as long as that box ends
// inside the page's main area and the window.
const overflowProblems = `async () => {
	` + settled + `
	const out = [];
	const doc = document.scrollingElement;
	if (doc.scrollWidth > window.innerWidth) {
		out.push("the document scrolls sideways: " + doc.scrollWidth + " > " + window.innerWidth + " px");
	}
	const main = document.querySelector("main").getBoundingClientRect();
	const clips = (el) => getComputedStyle(el).overflowX !== "visible";
	for (const table of document.querySelectorAll("main table")) {
		let box = table;
		while (box.tagName !== "MAIN" && !clips(box)) {
			box = box.parentElement;
		}
		if (box.tagName === "MAIN") {
			box = table;
		}
		const r = box.getBoundingClientRect();
		const name = (table.dataset.testid || table.closest("[id]").id) + (box === table ? "" : " in its ." + box.classList[0]);
		if (r.right > Math.min(main.right, window.innerWidth) + 1) {
			out.push("table " + name + " ends past its card: " + Math.round(r.right) + " > " + Math.round(Math.min(main.right, window.innerWidth)) + " px");
		}
	}
	return out;
}`

// scrollsInside names the tables on the page that scroll sideways inside
// their .table-scroll box: fine on a narrow window or a phone, but not on
// a laptop or wider, where a table's last columns (often a row's
// buttons) would start past the box's edge, with no scrollbar to say so
// where scrollbars overlay the page.
const scrollsInside = `() => [...document.querySelectorAll("main .table-scroll > table")].filter((t) => {
	const box = t.parentElement;
	return box.scrollWidth > box.clientWidth + 1;
}).map((t) => t.dataset.testid || t.closest("[id]").id)`

// TestEveryPageAtEveryWidth opens every page at each of widths (1400,
// 1280, 800 and 390 px): none scrolls sideways, every table is in its
// .table-scroll box and none ends past its card (wide tables scroll
// inside their box, but none does at 1400 or 1280 px: every column of
// every table, its buttons too, in sight on a laptop), error text keeps
// a readable width, the reconciliation page's sections keep their gap, the
// navigation folds behind a Menu button on a phone and opens with it, and
// no page logs a console error or CSP violation (newPage fails the test on
// any). The fixture makes the widest tables the pages have: a running
// bulk replay job with a long filter and reason (the Replays page), and
// inbox events with long ids, entities and errors, and their Retry
// buttons (the inbox list); widthsFixture adds a destination and a source
// with long names, address and secret references whose problems the
// settings pages show, and a reconciliation finding; the dead-letter
// group is a triage item already. The error pages are a 404 of an
// unknown path and of an unknown message. The fixture has no accounts
// (demo sign-in), so there is no viewer to be refused a 403 here
// (TestViewerIsForbiddenFromAdminPages checks that page at these
// widths); /demo is served only by console demo, which the fixture is
// not. Screenshots of all.
func TestEveryPageAtEveryWidth(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	ctx := context.Background()
	var inboxID int64
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status, attempts, last_error)
		VALUES ('stripe', 'evt_1', '{"a": 1}', 'failed', 3, 'handler: customer 42 not found: the upsert refused a version older than the stored one')
		RETURNING id`).Scan(&inboxID))
	_, err := f.pool.Exec(ctx, `INSERT INTO switchyard.audit_log (actor, action, target, reason, outcome, request_id, remote_addr, detail, prev_hash, hash)
		VALUES ('alice', 'replay_job.start', 'replay job 0190a5a4-1d2e-7c3b-9f00-0123456789ab', 'outage over', 'ok', 'r1', '127.0.0.1',
			'{"mode": "redeliver", "filter": {"fingerprint": "`+fixtureGroup+`"}}', '', '')`)
	require.NoError(t, err)
	var parkedID int64
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO switchyard.inbox_events
		(source, event_id, payload, entity_key, entity_version, status, attempts, last_error, error_fingerprint)
		VALUES ('stripe', 'evt_1NXWmK2eZvKYlo2C8dPm4xQzAbCdEfGh', '{"a": 2}', 'cus_Q8x2LmN4pR7sT1uV', 12, 'parked', 5,
			'handler: customer cus_Q8x2LmN4pR7sT1uV not found after 5 attempts: the upsert refused a version older than the stored one',
			'handler: customer not found')
		RETURNING id`).Scan(&parkedID))
	// A running job whose lease another instance holds (so nothing runs it
	// here: the fixture's states stay as written), and a finished one.
	_, err = f.pool.Exec(ctx, `INSERT INTO switchyard.replay_jobs (filter, filter_key, mode, actor, reason, rate_per_sec, upper_id,
			estimate, replayed, skipped, lease_owner, lease_expires_at)
		VALUES ('{"fingerprint": "`+fixtureGroup+`", "destination": "billing-service-eu-west-1", "topic": "order.payment.captured",
				"error_contains": "upstream connect error or disconnect/reset before headers. reset reason: connection termination"}',
			'wide', 'reapply', 'alice.mcallister@example.com',
			'the billing service was down between 02:10 and 02:40 UTC; every capture in that window must be applied again, with new keys',
			50, 61, 216, 120, 3, 'elsewhere', now() + interval '1 day');
		INSERT INTO switchyard.replay_jobs (filter, filter_key, mode, actor, reason, rate_per_sec, upper_id, estimate, replayed, state, finished_at)
		VALUES ('{"fingerprint": "`+fixtureGroup+`"}', 'done', 'redeliver', 'bob', 'outage over', 10, 61, 7, 7, 'done', now())`)
	require.NoError(t, err)
	triageID, findingID := widthsFixture(t, f)
	pages := []struct {
		name, path, title string
		status            int // 0: 200; an error page's status otherwise
	}{
		{"dashboard", "/", "Dashboard", 0},
		{"messages", "/messages", "Messages", 0},
		{"messages-delivered", "/messages?state=delivered", "Messages", 0},
		{"message", "/messages/61", "Message 61", 0},
		{"message-actions", "/messages/61/actions", "", 0},
		{"dead-letters", "/dead-letters", "Dead letters", 0},
		{"dead-letter-group", "/dead-letters/" + fixtureGroup, "", 0},
		{"blocked", "/aggregates/blocked", "", 0},
		{"inbox", "/inbox", "Inbox", 0},
		{"inbox-event", fmt.Sprintf("/inbox/events/%d", inboxID), "", 0},
		{"inbox-event-parked", fmt.Sprintf("/inbox/events/%d", parkedID), "", 0},
		{"replays", "/replays", "", 0},
		{"audit", "/audit", "Audit", 0},
		{"sessions", "/sessions", "Sessions", 0},
		{"account", "/account", "", 0},
		{"reconciliation", "/reconciliation", "Reconciliation", 0},
		{"finding", fmt.Sprintf("/reconciliation/findings/%d", findingID), "", 0},
		{"triage", "/triage", "Triage", 0},
		{"triage-item", fmt.Sprintf("/triage/items/%d", triageID), "", 0},
		{"settings", "/settings", "Configuration", 0},
		{"destination-new", "/settings/destinations/new", "", 0},
		{"destination-edit", "/settings/destinations/" + wideDestination, "", 0},
		{"source-new", "/settings/sources/new", "", 0},
		{"source-edit", "/settings/sources/" + wideSource, "", 0},
		{"not-found", "/no-such-page", "Not Found", http.StatusNotFound},
		{"message-not-found", "/messages/999999", "", http.StatusNotFound},
	}
	page := newPage(t, f.console.URL)
	// Chromium logs an error status as a console error: expected on the
	// error pages, and only there.
	errorPage := newPageExpecting(t, f.console.URL, "404")
	expect := newExpect()
	for _, w := range widths {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		require.NoError(t, errorPage.SetViewportSize(w.width, w.height))
		for _, p := range pages {
			page := page // this page's tab: an error page opens in errorPage
			if p.status != 0 {
				page = errorPage
			}
			resp, err := page.Goto(p.path)
			require.NoError(t, err, p.path)
			require.Equal(t, cmp.Or(p.status, http.StatusOK), resp.Status(), p.path)
			require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToBeVisible(), p.path)
			if p.title != "" {
				require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToContainText(p.title), p.path)
			}
			requireLayout(t, page, p.path, w.width)
			inside, err := page.Evaluate(scrollsInside)
			require.NoError(t, err)
			t.Logf("%s at %d px: tables scrolling inside their card: %v", p.path, w.width, inside)
			if w.whole {
				require.Empty(t, inside, "%s at %d px: tables scrolling inside their box, their last columns out of sight", p.path, w.width)
			}
			switch p.name {
			case "inbox-event-parked":
				checkTriageCardGap(t, page, w.width)
			case "reconciliation":
				checkSectionGaps(t, page, w.width)
			}
			navOpen := ""
			if w.collapsed && p.name == "audit" {
				navOpen = "width-390-nav-open"
			}
			checkNavigation(t, page, w.collapsed, p.path, navOpen)
			screenshot(t, page, "width-"+w.name+"-"+p.name)
		}
	}
}

// The names of the destination and source the settings pages edit: long
// ones, as real names get, so that the lists and forms must fit them.
const (
	wideDestination = "billing-service-eu-west-1.payments-capture-webhook-v2"
	wideSource      = "stripe-payments-eu-west-1.connect-accounts-webhook"
)

// widthsFixture adds what the pages the fixture lacks need: a webhook
// destination and an inbox source to edit, and a reconciliation check
// with a finding (disabled, so that no cycle runs and changes it). It
// returns the dead-letter group's triage item and the finding.
func widthsFixture(t *testing.T, f pagesFixture) (triageID, findingID int64) {
	t.Helper()
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref)
		VALUES ('`+wideDestination+`', 'webhook',
			'https://billing.internal.example.com/api/v2/webhooks/payments/capture?tenant=eu-west-1&format=standard-webhooks', 'BILLING_WEBHOOK_SECRET');
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to)
		VALUES ('`+wideSource+`', 'stripe', '{STRIPE_CONNECT_WEBHOOK_SECRET_CURRENT,STRIPE_CONNECT_WEBHOOK_SECRET_PREVIOUS}', 'forward', 'shop')`)
	require.NoError(t, err)
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT id FROM switchyard.triage_items
		WHERE kind = 'dead_letter_group' AND ref->>'fingerprint' = $1`, fixtureGroup).Scan(&triageID))
	require.NoError(t, f.pool.QueryRow(ctx, `WITH c AS (
			INSERT INTO switchyard.reconcile_checks (name, kind, enabled, remote_url, destination)
			VALUES ('orders-vs-billing', 'delivery', false, 'https://billing.internal.example.com/api/v2/reconcile/orders', 'billing')
			RETURNING id),
		cy AS (
			INSERT INTO switchyard.reconcile_cycles (check_id, state, finished_at, examined, in_sync, mismatch)
			SELECT id, 'complete', now(), 60, 59, 1 FROM c
			RETURNING id, check_id)
		INSERT INTO switchyard.reconcile_findings (check_id, key, kind, ref, diff, first_cycle_id, last_cycle_id)
		SELECT check_id, 'order-0190a5a4-1d2e-7c3b-9f00-0123456789ab', 'mismatch', 50,
			'{"amount": {"local": "1299.00", "remote": "1199.00"}, "customer_reference": {"local": "cus_Q8x2LmN4pR7sT1uV-eu-west-1", "remote": null}}',
			id, id FROM cy
		RETURNING id`).Scan(&findingID))
	_, err = f.pool.Exec(ctx, `INSERT INTO switchyard.reconcile_finding_events (finding_id, cycle_id, event)
		SELECT id, first_cycle_id, 'opened' FROM switchyard.reconcile_findings WHERE id = $1`, findingID)
	require.NoError(t, err)
	return triageID, findingID
}

// cardGaps measures, on a parked event's page, the gap between the
// event's facts and its triage card, and between that card and the next
// one (the retry).
const cardGaps = `() => {
	const box = (id) => document.querySelector("[data-testid=" + id + "]").getBoundingClientRect();
	const facts = box("inbox-event"), triage = box("inbox-event-triage"), retry = box("event-retry");
	return [Math.round(triage.top - facts.bottom), Math.round(retry.top - triage.bottom)];
}`

// checkTriageCardGap expects a parked event's triage card right under its
// facts, as far from them as the cards on the page are from each other.
func checkTriageCardGap(t *testing.T, page playwright.Page, width int) {
	t.Helper()
	px := evaluatePixels(t, page, cardGaps)
	require.Len(t, px, 2)
	require.Equal(t, px[1], px[0], "at %d px: the triage card is as far from the facts as from the next card", width)
	require.GreaterOrEqual(t, px[0], 16.0, "at %d px: the triage card keeps its distance from the facts", width)
}

// sectionGaps measures, on the reconciliation page, the gap between the
// page's header and its first section (the checks), then between each
// section and the next: from the bottom of one's table box to the next
// one's heading.
const sectionGaps = `() => {
	const gaps = [];
	let above = document.querySelector("main .page-header").getBoundingClientRect();
	for (const section of document.querySelectorAll("#reconcile-region > section")) {
		const r = section.getBoundingClientRect();
		gaps.push(Math.round(r.top - above.bottom));
		above = r;
	}
	return gaps;
}`

// checkSectionGaps expects the reconciliation page's three sections
// (checks, findings, recent cycles) as far from each other as the first
// is from the page's header: a section ends with a bare table box, which
// must not touch the next section's heading.
func checkSectionGaps(t *testing.T, page playwright.Page, width int) {
	t.Helper()
	px := evaluatePixels(t, page, sectionGaps)
	require.Len(t, px, 3, "at %d px: the header and the three sections", width)
	require.GreaterOrEqual(t, px[0], 16.0, "at %d px: the checks keep their distance from the header", width)
	for i, gap := range px[1:] {
		require.Equal(t, px[0], gap, "at %d px: section %d is as far from the one above as the first is from the header", width, i+2)
	}
}

// evaluatePixels runs script, which returns a list of lengths in pixels,
// on the page.
func evaluatePixels(t *testing.T, page playwright.Page, script string) []float64 {
	t.Helper()
	got, err := page.Evaluate(script)
	require.NoError(t, err)
	list, ok := got.([]any)
	require.True(t, ok, "%T", got)
	px := make([]float64, len(list))
	for i, v := range list {
		switch n := v.(type) {
		case int:
			px[i] = float64(n)
		case float64:
			px[i] = n
		default:
			t.Fatalf("length %d is a %T", i, v)
		}
	}
	return px
}

// requireLayout expects the page, at width px, to have none of the
// layoutProblems and overflowProblems.
func requireLayout(t *testing.T, page playwright.Page, what string, width int) {
	t.Helper()
	for _, check := range []string{layoutProblems, overflowProblems} {
		problems, err := page.Evaluate(check)
		require.NoError(t, err)
		require.Empty(t, problems, "%s at %d px", what, width)
	}
}

// checkNavigation expects the navigation's links in view on a wide
// screen; on a phone, folded behind the Menu button, which opens it (then
// screenshot as openShot, unless that is "").
func checkNavigation(t *testing.T, page playwright.Page, collapsed bool, path, openShot string) {
	t.Helper()
	expect := newExpect()
	link := page.GetByTestId("nav-messages")
	toggle := page.GetByTestId("nav-toggle")
	if !collapsed {
		require.NoError(t, expect.Locator(link).ToBeVisible(), "%s: navigation in view", path)
		require.NoError(t, expect.Locator(toggle).ToBeHidden(), "%s: no Menu button on a wide screen", path)
		return
	}
	require.NoError(t, expect.Locator(link).ToBeHidden(), "%s: navigation folded on a phone", path)
	require.NoError(t, toggle.Click(), path)
	require.NoError(t, expect.Locator(link).ToBeVisible(), "%s: Menu opens the navigation", path)
	if openShot != "" {
		screenshot(t, page, openShot)
	}
	require.NoError(t, toggle.Click(), path)
	require.NoError(t, expect.Locator(link).ToBeHidden(), "%s: Menu closes it again", path)
}
