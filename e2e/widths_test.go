package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// widths are the viewports every page must work at: a laptop, a narrow
// window and a phone.
var widths = []struct {
	name          string
	width, height int
	collapsed     bool // the navigation is folded behind its Menu button
}{
	{"1400", 1400, 900, false},
	{"800", 800, 900, false},
	{"390", 390, 844, true},
}

// layoutProblems lists what is wrong with the page's layout at its
// width: the document scrolling sideways (a wide table must scroll inside
// its card instead), and error text squeezed into a narrow column.
const layoutProblems = `() => {
	const out = [];
	const doc = document.documentElement;
	if (doc.scrollWidth > doc.clientWidth + 1) {
		let widest = "";
		for (const el of document.querySelectorAll("main *")) {
			const r = el.getBoundingClientRect();
			if (r.right > doc.clientWidth + 1 && !el.closest(".table-wrap, .table-scroll, pre, .payload, .chart")) {
				widest = el.tagName.toLowerCase() + "." + [...el.classList].join(".") + " (" + Math.round(r.right) + " px)";
				break;
			}
		}
		out.push("the page scrolls sideways: " + doc.scrollWidth + " > " + doc.clientWidth + " px; first overflowing: " + widest);
	}
	for (const el of document.querySelectorAll(".error-cell, .error-text, td.wrap, .alert, [data-testid=error] h2")) {
		const r = el.getBoundingClientRect();
		if (el.textContent.trim().length > 24 && r.width > 0 && r.width < Math.min(160, doc.clientWidth - 40)) {
			out.push("error text squeezed to " + Math.round(r.width) + " px: " + el.textContent.trim().slice(0, 40));
		}
	}
	return out;
}`

// TestEveryPageAtThreeWidths opens every page at 1400, 800 and 390 px:
// none scrolls sideways (wide tables scroll inside their card), error text
// keeps a readable width, the navigation folds behind a Menu button on a
// phone and opens with it, and no page logs a console error or CSP
// violation (newPage fails the test on any). Screenshots of all.
func TestEveryPageAtThreeWidths(t *testing.T) {
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
	pages := []struct{ name, path, title string }{
		{"dashboard", "/", "Dashboard"},
		{"messages", "/messages", "Messages"},
		{"message", "/messages/61", "Message 61"},
		{"message-actions", "/messages/61/actions", ""},
		{"dead-letters", "/dead-letters", "Dead letters"},
		{"dead-letter-group", "/dead-letters/" + fixtureGroup, ""},
		{"blocked", "/aggregates/blocked", ""},
		{"inbox", "/inbox", "Inbox"},
		{"inbox-event", fmt.Sprintf("/inbox/events/%d", inboxID), ""},
		{"replays", "/replays", ""},
		{"audit", "/audit", "Audit"},
		{"sessions", "/sessions", "Sessions"},
		{"account", "/account", ""},
		{"reconciliation", "/reconciliation", "Reconciliation"},
	}
	page := newPage(t, f.console.URL)
	expect := playwright.NewPlaywrightAssertions()
	for _, w := range widths {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		for _, p := range pages {
			_, err := page.Goto(p.path)
			require.NoError(t, err, p.path)
			require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToBeVisible(), p.path)
			if p.title != "" {
				require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToContainText(p.title), p.path)
			}
			problems, err := page.Evaluate(layoutProblems)
			require.NoError(t, err)
			require.Empty(t, problems, "%s at %d px", p.path, w.width)
			checkNavigation(t, page, w.collapsed, p.path)
			screenshot(t, page, "width-"+w.name+"-"+p.name)
		}
	}
}

// checkNavigation expects the navigation's links in view on a wide
// screen; on a phone, folded behind the Menu button, which opens it.
func checkNavigation(t *testing.T, page playwright.Page, collapsed bool, path string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions()
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
	if strings.HasPrefix(path, "/audit") {
		screenshot(t, page, "width-390-nav-open")
	}
	require.NoError(t, toggle.Click(), path)
	require.NoError(t, expect.Locator(link).ToBeHidden(), "%s: Menu closes it again", path)
}
