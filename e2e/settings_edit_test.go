package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// TestSettingsEditDestinationAndSourceWithTestEvents: an admin creates a
// webhook destination on its page (a wrong field is answered with the
// field and the reason, nothing typed lost), sends it a test event and
// watches it get delivered live; then creates a forward source to it and
// sends that a signed test event, which the inbox records and forwards.
// Screenshots at 1400 and 800 px.
func TestSettingsEditDestinationAndSourceWithTestEvents(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var received atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Switchyard-Test") == "true" && r.Header.Get("webhook-signature") != "" {
			received.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	dbURL := dbtest.NewURL(t)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true",
		"HOOK_SECRET=" + secret, "CRM_WEBHOOK_SECRET=" + secret})
	t.Cleanup(func() { console.Stop(t) })

	// A refused form is answered 422, which Chromium reports on its
	// console: expected here, and only for the form's own post.
	page := newPageTolerating(t, console.URL, func(problem string) bool {
		return strings.Contains(problem, "status of 422") && strings.Contains(problem, "/settings/destinations:")
	})
	expect := newExpect()
	require.NoError(t, page.SetViewportSize(1400, 900))
	_, err := page.Goto("/settings")
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("new-destination").Click())
	require.NoError(t, expect.Page(page).ToHaveTitle("New destination · Switchyard"))

	form := page.GetByTestId("destination-form")
	require.NoError(t, form.Locator("#f-name").Fill("crm-service"))
	require.NoError(t, form.Locator("#f-address").Fill(receiver.URL+"/hooks"))
	require.NoError(t, form.Locator("#f-secret_refs").Fill("HOOK_SECRET\nHOOK_NEXT_SECRET"))
	require.NoError(t, form.Locator("#f-concurrency").Fill("lots"))
	require.NoError(t, form.Locator("input[name=permanent][value=list]").Check())
	require.NoError(t, form.Locator("#f-permanent_statuses").Fill("400, 422"))
	require.NoError(t, page.GetByTestId("save").Click())

	// Refused: the field and the reason, and everything typed kept.
	require.NoError(t, expect.Locator(page.GetByTestId("form-error")).ToContainText("concurrency"))
	concurrency := page.GetByTestId("field-concurrency")
	require.NoError(t, expect.Locator(concurrency.GetByTestId("field-error")).ToHaveText(`The concurrency must be a whole number from 1 to 10000 deliveries at once; got "lots".`))
	require.NoError(t, expect.Locator(form.Locator("#f-concurrency")).ToHaveAttribute("aria-invalid", "true"))
	require.NoError(t, expect.Locator(form.Locator("#f-address")).ToHaveValue(receiver.URL+"/hooks"))
	require.NoError(t, expect.Locator(form.Locator("#f-permanent_statuses")).ToHaveValue("400, 422"))
	require.NoError(t, expect.Locator(form.Locator("input[name=permanent][value=list]")).ToBeChecked())
	screenshot(t, page, "settings-destination-invalid-1400")

	require.NoError(t, form.Locator("#f-concurrency").Fill("4"))
	require.NoError(t, page.GetByTestId("save").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("form-notice")).ToContainText("Saved"))
	require.NoError(t, expect.Page(page).ToHaveTitle("Destination crm-service · Switchyard"))
	secrets := page.GetByTestId("secret-status")
	require.NoError(t, expect.Locator(secrets.GetByTestId("secret-ref").Filter(playwright.LocatorFilterOptions{HasText: "HOOK_SECRET"}).First()).ToContainText("set"))
	require.NoError(t, expect.Locator(secrets).ToContainText("HOOK_NEXT_SECRET not set"))
	require.NoError(t, expect.Locator(page.GetByTestId("setting-problem")).ToContainText("HOOK_NEXT_SECRET is empty"))

	// Rotation done: the second reference dropped; the problem goes.
	require.NoError(t, form.Locator("#f-secret_refs").Fill("HOOK_SECRET"))
	require.NoError(t, page.GetByTestId("save").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("form-notice")).ToContainText("Saved"))
	require.NoError(t, expect.Locator(page.GetByTestId("setting-problem")).ToHaveCount(0))

	// The test event goes through the outbox to the receiver; the panel
	// follows it until delivered (the dispatcher rereads destinations
	// every 10 s).
	// Each refresh merges into the panel (idiomorph): the message link
	// held before it is the one after it, so a click or focus on it
	// survives.
	require.NoError(t, page.GetByTestId("send-test").Click())
	link, err := page.GetByTestId("test-status").Locator("a").EvaluateHandle("e => e", nil)
	require.NoError(t, err)
	_, err = page.GetByTestId("test-live").Evaluate("e => { window.testLiveSwaps = 0; e.addEventListener('htmx:afterSettle', () => window.testLiveSwaps++); }", nil)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("test-state")).ToHaveText("delivered", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}))
	require.GreaterOrEqual(t, received.Load(), int64(1), "the receiver got a signed test delivery")
	_, err = page.WaitForFunction("() => window.testLiveSwaps > 0", nil)
	require.NoError(t, err)
	connected, err := link.Evaluate("e => e.isConnected")
	require.NoError(t, err)
	require.Equal(t, true, connected, "the test panel's message link was replaced by a refresh")
	screenshot(t, page, "settings-destination-tested-1400")

	// A forward source to it, and its signed test event.
	_, err = page.Goto("/settings/sources/new")
	require.NoError(t, err)
	sform := page.GetByTestId("source-form")
	require.NoError(t, sform.Locator("#f-name").Fill("crm"))
	require.NoError(t, sform.Locator("#f-secret_refs").Fill("CRM_WEBHOOK_SECRET"))
	require.NoError(t, expect.Locator(sform.Locator("#f-sql_function")).ToBeHidden(), "the sql handler's field is hidden for forward")
	require.NoError(t, sform.Locator("#f-forward_to").Fill("crm-service"))
	require.NoError(t, sform.Locator("#f-entity_field").Fill("data.customer.id"))
	require.NoError(t, page.GetByTestId("save").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("form-notice")).ToContainText("Saved"))
	require.NoError(t, page.GetByTestId("send-test").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("test-state")).ToHaveText("processed"))
	screenshot(t, page, "settings-source-tested-1400")

	// The list, live, at both widths.
	_, err = page.Goto("/settings")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("destination-row")).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("source-row")).ToContainText("to destination crm-service, ordered by data.customer.id"))
	screenshot(t, page, "settings-list-1400")
	require.NoError(t, page.SetViewportSize(800, 900))
	requireNoSidewaysScroll(t, page, "the configuration list")
	screenshot(t, page, "settings-list-800")
	_, err = page.Goto("/settings/destinations/crm-service")
	require.NoError(t, err)
	requireNoSidewaysScroll(t, page, "a destination's page")
	screenshot(t, page, "settings-destination-800")
	body, err := page.Locator("body").TextContent()
	require.NoError(t, err)
	require.NotContains(t, body, secret, "secrets are never shown")
}
