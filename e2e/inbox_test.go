package e2e

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// hostilePayload must render as inert text on the detail page.
const hostilePayload = `{"note": "<img src=x onerror=alert(1)> <script>alert(2)</script> <b hx-get=\"/x\" hx-trigger=\"load\">x</b>"}`

// TestInboxPagesRenderRealData records inbound events of every status,
// then lists, filters (the filter survives a reload through the URL),
// pages and opens them.
func TestInboxPagesRenderRealData(t *testing.T) {
	t.Parallel()
	console, pool := startConsoleDB(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO switchyard.inbox_events (source, event_id, headers, payload, entity_key, entity_version, status, attempts, last_error, error_fingerprint, processed_at)
		SELECT 'shop', 'evt_' || g, '{"webhook-id": "x", "webhook-signature": "v1,abc"}', jsonb_build_object('n', g),
			'customer/' || (g % 7), g, 'processed', 1, NULL, NULL, now()
		FROM generate_series(1, 60) g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO switchyard.inbox_events (source, event_id, payload, status, attempts, last_error, error_fingerprint)
		VALUES ('billing', 'evt_failed', '{"a": 1}', 'failed', 2, 'customer cus_9: lock timeout', 'customer ?: lock timeout'),
		       ('billing', 'evt_parked', $1::jsonb, 'parked', 5, 'handler panicked: <b>boom</b>', 'handler panicked'),
		       ('shop', 'evt_stale', '{"a": 2}', 'stale', 0, NULL, NULL)`, hostilePayload)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.inbox_duplicates (source, slot, count) VALUES ('shop', 0, 4), ('shop', 1, 3)`)
	require.NoError(t, err)

	page := newPage(t, console.URL)
	expect := newExpect()
	// Playwright calls these from its own goroutine.
	var dialogs, strayRequests atomic.Int32
	page.OnDialog(func(d playwright.Dialog) { dialogs.Add(1); _ = d.Dismiss() })
	page.OnRequest(func(r playwright.Request) {
		if r.URL() == console.URL+"/x" {
			strayRequests.Add(1)
		}
	})

	_, err = page.Goto("/inbox")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveTitle("Inbox · Switchyard"))
	rows := page.GetByTestId("inbox-event-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(50))
	require.NoError(t, expect.Locator(rows.First()).ToContainText("evt_stale"))
	screenshot(t, page, "inbox")

	require.NoError(t, page.GetByTestId("page-next").Click())
	require.NoError(t, expect.Locator(rows).ToHaveCount(13))
	require.NoError(t, expect.Locator(rows.Last()).ToContainText("evt_1"))

	_, err = page.GetByTestId("filter-status").SelectOption(playwright.SelectOptionValues{Values: &[]string{"parked"}})
	require.NoError(t, err)
	require.NoError(t, page.GetByRole(*playwright.AriaRoleButton, playwright.PageGetByRoleOptions{Name: "Filter"}).Click())
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/inbox?source=&status=parked"))
	_, err = page.Reload()
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("filter-status")).ToHaveValue("parked"))
	require.NoError(t, expect.Locator(rows).ToContainText("handler panicked: <b>boom</b>"))

	require.NoError(t, page.GetByTestId("inbox-event-link").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("event-status")).ToHaveText("parked"))
	require.NoError(t, expect.Locator(page.GetByTestId("event-attempts")).ToHaveText("5"))
	require.NoError(t, expect.Locator(page.GetByTestId("event-error")).ToHaveText("handler panicked: <b>boom</b>"))
	require.NoError(t, expect.Locator(page.GetByTestId("event-payload")).ToContainText(`<script>alert(2)</script>`))
	require.NoError(t, expect.Locator(page.GetByTestId("event-payload")).ToContainText(`hx-get=\"/x\"`))
	require.NoError(t, expect.Locator(page.Locator("main img")).ToHaveCount(0))
	// No script but the console's own (the triage summary loads triage.js
	// from /static/): nothing of the payload became markup.
	require.NoError(t, expect.Locator(page.Locator("main script:not([src^='/static/'])")).ToHaveCount(0))
	require.NoError(t, expect.Locator(page.Locator("main script")).ToHaveCount(1))
	screenshot(t, page, "inbox-event")

	_, err = page.Goto("/inbox?status=duplicates")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("inbox-duplicates")).ToContainText("7"))
	screenshot(t, page, "inbox-duplicates")

	_, err = page.Goto("/inbox?source=shop&status=processed")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows.First()).ToContainText("evt_60"))
	require.NoError(t, rows.First().GetByTestId("inbox-event-link").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("event-signature")).ToContainText("verified"))

	require.Zero(t, dialogs.Load(), "a payload opened a dialog")
	require.Zero(t, strayRequests.Load(), "a payload made a request")
}
