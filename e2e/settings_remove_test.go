package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// noSidewaysScroll is true when the document does not scroll sideways:
// a wide table may scroll inside its card, never the page.
const noSidewaysScroll = `() => document.scrollingElement.scrollWidth <= innerWidth`

// requireNoSidewaysScroll fails when page scrolls sideways at its width.
func requireNoSidewaysScroll(t *testing.T, page playwright.Page, what string) {
	t.Helper()
	ok, err := page.Evaluate(noSidewaysScroll)
	require.NoError(t, err)
	if ok != true {
		problems, err := page.Evaluate(layoutProblems)
		require.NoError(t, err)
		t.Fatalf("%s scrolls sideways: %v", what, problems)
	}
}

// TestSettingsRenameAndDeleteFromTheirPages: an admin fixes a
// destination's misspelt name (its forward source follows), is refused
// the delete while a message is pending (the reason in the panel), then
// deletes it once the message is delivered; renames and deletes a source
// the same way. Every configuration page fits 800 px without scrolling
// sideways. Screenshots at 1400 and 800 px.
func TestSettingsRenameAndDeleteFromTheirPages(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true", "HOOK_SECRET=" + secret, "CRM_WEBHOOK_SECRET=" + secret})
	t.Cleanup(func() { console.Stop(t) })
	_, err = pool.Exec(ctx, `
		INSERT INTO switchyard.destinations (name, kind, address, secret_ref) VALUES
			('crm-sevrice', 'webhook', 'https://crm-sync.example/a-rather-long-path/for-hooks/v1/events', 'HOOK_SECRET'),
			('billing', 'webhook', 'https://billing.example/hooks', 'HOOK_SECRET');
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field) VALUES
			('crm', 'standard-webhooks', '{CRM_WEBHOOK_SECRET}', 'forward', 'crm-sevrice', 'data.customer.id')`)
	require.NoError(t, err)

	// Refusals answer 409 and 422, which Chromium reports on its console:
	// expected here, for the panel's own posts only.
	page := newPageTolerating(t, console.URL, func(problem string) bool {
		return (strings.Contains(problem, "status of 409") || strings.Contains(problem, "status of 422")) &&
			(strings.Contains(problem, "/delete") || strings.Contains(problem, "/rename"))
	})
	expect := newExpect()
	require.NoError(t, page.SetViewportSize(1400, 900))
	_, err = page.Goto("/settings/destinations/crm-sevrice")
	require.NoError(t, err)
	panel := page.GetByTestId("remove-panel")
	require.NoError(t, expect.Locator(panel).ToContainText("Only a destination that no message names yet can be renamed"))
	require.NoError(t, panel.Locator("#f-new_name").Fill("crm-service"))
	require.NoError(t, panel.GetByTestId("rename").Click())
	require.NoError(t, expect.Page(page).ToHaveTitle("Destination crm-service · Switchyard"))
	require.NoError(t, expect.Locator(page.GetByTestId("form-notice")).ToHaveText("Renamed from crm-sevrice. Every dispatcher uses the new name within 10 s."))
	screenshot(t, page, "settings-destination-renamed-1400")

	require.NoError(t, panel.Locator("#f-confirm").Check())
	require.NoError(t, panel.GetByTestId("delete").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("remove-error")).ToContainText("The inbox source crm forwards to destination crm-service"))
	_, err = page.Goto("/settings/sources/crm")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#f-forward_to")).ToHaveValue("crm-service"), "the source followed the rename")
	require.NoError(t, page.Locator("#f-forward_to").Fill("billing"))
	require.NoError(t, page.GetByTestId("save").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("form-notice")).ToContainText("Saved"))

	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('customer.updated', 'crm-service', '{}')`)
	require.NoError(t, err)
	_, err = page.Goto("/settings/destinations/crm-service")
	require.NoError(t, err)
	require.NoError(t, panel.Locator("#f-confirm").Check())
	require.NoError(t, panel.GetByTestId("delete").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("remove-error")).ToContainText("still has 1 pending message to deliver: they would be lost"))
	screenshot(t, page, "settings-destination-delete-refused-1400")
	require.NoError(t, page.SetViewportSize(800, 900))
	requireNoSidewaysScroll(t, page, "a destination's page with a refusal")
	screenshot(t, page, "settings-destination-delete-refused-800")
	require.NoError(t, page.SetViewportSize(1400, 900))

	_, err = pool.Exec(ctx, `UPDATE switchyard.outbox SET state = 'delivered', finished_at = now()`)
	require.NoError(t, err)
	require.NoError(t, panel.Locator("#f-confirm").Check())
	require.NoError(t, panel.GetByTestId("delete").Click())
	require.NoError(t, expect.Page(page).ToHaveTitle("Configuration · Switchyard"))
	require.NoError(t, expect.Locator(page.GetByTestId("settings-notice")).ToHaveText("Destination crm-service deleted. Every dispatcher drops it within 10 s."))
	require.NoError(t, expect.Locator(page.GetByTestId("destination-row")).ToHaveCount(1))
	screenshot(t, page, "settings-destination-deleted-1400")

	// The source: renamed before its first event, then deleted.
	_, err = page.Goto("/settings/sources/crm")
	require.NoError(t, err)
	require.NoError(t, panel.Locator("#f-new_name").Fill("crm-hooks"))
	require.NoError(t, panel.GetByTestId("rename").Click())
	require.NoError(t, expect.Page(page).ToHaveTitle("Inbox source crm-hooks · Switchyard"))
	require.NoError(t, expect.Locator(page.GetByTestId("form-notice")).ToHaveText("Renamed from crm. Its senders must post to /inbox/crm-hooks now."))
	require.NoError(t, page.SetViewportSize(800, 900))
	requireNoSidewaysScroll(t, page, "a source's page")
	screenshot(t, page, "settings-source-renamed-800")
	require.NoError(t, page.SetViewportSize(1400, 900))
	require.NoError(t, panel.GetByTestId("delete").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("remove-error")).ToHaveText("Tick the box to confirm the delete."))
	require.NoError(t, panel.Locator("#f-confirm").Check())
	require.NoError(t, panel.GetByTestId("delete").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("settings-notice")).ToHaveText("Inbox source crm-hooks deleted. Every receiver drops it within 10 s."))
	require.NoError(t, expect.Locator(page.GetByTestId("source-row")).ToHaveCount(0))

	// Every configuration page at 800 px: nothing scrolls sideways.
	require.NoError(t, page.SetViewportSize(800, 900))
	for _, p := range []struct{ path, name string }{
		{"/settings", "settings-list-after-delete-800"},
		{"/settings/destinations/new", "settings-destination-new-800"},
		{"/settings/destinations/billing", "settings-destination-billing-800"},
		{"/settings/sources/new", "settings-source-new-800"},
	} {
		_, err = page.Goto(p.path)
		require.NoError(t, err)
		require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToBeVisible())
		requireNoSidewaysScroll(t, page, p.path)
		screenshot(t, page, p.name)
	}
	var audited int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.audit_log WHERE action IN
		('destination.rename', 'destination.delete', 'inbox_source.rename', 'inbox_source.delete')`).Scan(&audited))
	require.Equal(t, 4, audited)
}
