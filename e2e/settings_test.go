package e2e

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// TestSettingsPageShowsConfigurationAndProblems: the configuration page
// lists destinations and inbox sources, says which secret references
// resolve (never a secret), and what is wrong with each row.
func TestSettingsPageShowsConfigurationAndProblems(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true", "CRM_SERVICE_SECRET=" + secret, "CRM_WEBHOOK_SECRET=" + secret})
	t.Cleanup(func() { console.Stop(t) })
	_, err = pool.Exec(context.Background(), `
		INSERT INTO switchyard.destinations (name, kind, address, secret_ref, secret_refs, permanent_statuses) VALUES
			('crm-service', 'webhook', 'https://crm-sync.example/hooks', 'CRM_SERVICE_SECRET', '{}', NULL),
			('billing', 'webhook', 'https://billing.example/hooks', 'CRM_SERVICE_SECRET', '{BILLING_NEXT_SECRET}', '{400,422}');
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field, sql_function) VALUES
			('crm', 'standard-webhooks', '{CRM_WEBHOOK_SECRET}', 'forward', 'crm-service', 'data.customer.id', ''),
			('payments', 'stripe', '{STRIPE_WEBHOOK_SECRET}', 'sql', '', '', 'billing.record_payment')`)
	require.NoError(t, err)

	page := newPage(t, console.URL)
	expect := newExpect()
	_, err = page.Goto("/settings")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveTitle("Configuration · Switchyard"))
	dests := page.GetByTestId("destination-row")
	require.NoError(t, expect.Locator(dests).ToHaveCount(2))
	billing := dests.Filter(playwright.LocatorFilterOptions{HasText: "billing"})
	require.NoError(t, expect.Locator(billing).ToContainText("400, 422"))
	require.NoError(t, expect.Locator(billing.GetByTestId("setting-problem")).ToContainText("environment variable BILLING_NEXT_SECRET is empty"))
	crm := dests.Filter(playwright.LocatorFilterOptions{HasText: "crm-service"})
	require.NoError(t, expect.Locator(crm.GetByTestId("setting-ok")).ToBeVisible())
	require.NoError(t, expect.Locator(crm).ToContainText("401, 403, 404, 408, 429 (default)"))

	sources := page.GetByTestId("source-row")
	require.NoError(t, expect.Locator(sources).ToHaveCount(2))
	require.NoError(t, expect.Locator(sources.Filter(playwright.LocatorFilterOptions{HasText: "crm"}).First()).ToContainText("to destination crm-service, ordered by data.customer.id"))
	payments := sources.Filter(playwright.LocatorFilterOptions{HasText: "payments"})
	require.NoError(t, expect.Locator(payments).ToContainText("calls billing.record_payment(event, headers)"))
	require.NoError(t, expect.Locator(payments.GetByTestId("secret-ref")).ToContainText("STRIPE_WEBHOOK_SECRET not set"))
	require.NoError(t, expect.Locator(payments.GetByTestId("setting-problem")).ToContainText("STRIPE_WEBHOOK_SECRET is empty"))
	body, err := page.Locator("body").TextContent()
	require.NoError(t, err)
	require.NotContains(t, body, secret, "secrets are never shown")
	screenshot(t, page, "settings")
}
