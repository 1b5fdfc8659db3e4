package e2e

import (
	"regexp"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// TestDemoDriftIsFoundShownLiveAndRepaired is a newcomer's path through
// the demo's reconciliation: its two checks run against the in-process
// external system and agree with it; drift injected on /demo (orders
// dropped, altered and added remotely, deliveries lost) appears on the
// open Reconciliation page without a reload; a lost delivery repaired
// from its finding's page is redelivered, and a later cycle resolves it.
// The checks run every second here (--demo-check-interval), not every
// ten: each wait below is for the next cycle, whichever it is.
func TestDemoDriftIsFoundShownLiveAndRepaired(t *testing.T) {
	t.Parallel()
	p, _ := startDemo(t, "SWITCHYARD_DEMO_CHECK_INTERVAL=1s")

	expect := newExpect()
	long := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(40000)}
	watch := newPage(t, p.URL)
	_, err := watch.ExpectResponse(regexp.MustCompile(`/reconciliation/live`), func() error {
		_, err := watch.Goto("/reconciliation")
		return err
	})
	require.NoError(t, err)
	orders := watch.Locator(`[data-testid=reconcile-check][data-check=demo-orders]`)
	deliveries := watch.Locator(`[data-testid=reconcile-check][data-check=demo-deliveries]`)
	require.NoError(t, expect.Locator(orders.GetByTestId("cycle-state")).ToHaveText("complete", long))
	require.NoError(t, expect.Locator(deliveries.GetByTestId("cycle-state")).ToHaveText("complete", long))
	require.NoError(t, expect.Locator(orders.GetByTestId("open-drift")).ToHaveText("0"))
	require.NoError(t, expect.Locator(deliveries.GetByTestId("open-drift")).ToHaveText("0"))
	_, err = watch.Evaluate(`() => { window.notReloaded = true }`)
	require.NoError(t, err)
	screenshot(t, watch, "demo-reconciliation-in-sync")

	// The receiver stops failing before anything is repaired: a repair's
	// delivery then never goes dead after its four attempts (one in 625
	// would at the demo's 20 %), which would leave its finding open.
	panel := newPage(t, p.URL)
	_, err = panel.Goto("/demo")
	require.NoError(t, err)
	require.NoError(t, panel.Locator(`input[name="failure_percent"]`).Fill("0"))
	require.NoError(t, panel.GetByRole(*playwright.AriaRoleButton, playwright.PageGetByRoleOptions{Name: "Apply"}).Click())
	require.NoError(t, expect.Locator(panel.GetByTestId("demo-saved")).ToBeVisible())
	_, err = panel.Goto("/demo")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(panel.Locator(`input[name="failure_percent"]`)).ToHaveValue("0"))
	for id, n := range map[string]string{"drift-drop": "2", "drift-alter": "2", "drift-add": "1", "drift-lose": "2"} {
		require.NoError(t, panel.GetByTestId(id).Fill(n))
	}
	screenshot(t, panel, "demo-drift-panel")
	require.NoError(t, panel.GetByTestId("drift-apply").Click())
	require.NoError(t, expect.Locator(panel.GetByTestId("demo-saved")).ToBeVisible())

	// Within a cycle or two the drift is on the open page.
	live := playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(40000)}
	require.NoError(t, expect.Locator(deliveries.GetByTestId("open-drift")).ToHaveText("2", long))
	require.NoError(t, expect.Locator(watch.Locator(`[data-testid=finding-row][data-kind=missing_local][data-key="1000000001"]`)).ToHaveCount(1, live))
	require.NoError(t, expect.Locator(orders.GetByTestId("open-drift")).Not().ToHaveText("0"))
	still, err := watch.Evaluate(`() => window.notReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, still, "the page was reloaded")
	screenshot(t, watch, "demo-reconciliation-drift")

	// Repair one lost delivery from its finding's page.
	_, err = watch.Goto("/reconciliation?check=demo-deliveries")
	require.NoError(t, err)
	require.NoError(t, watch.Locator(`[data-testid=finding-row][data-kind=missing_remote] [data-testid=finding-link]`).First().Click())
	require.NoError(t, watch.GetByTestId("repair-reason").Fill("the receiver lost it"))
	require.NoError(t, watch.GetByTestId("repair-button").Click())
	require.NoError(t, expect.Locator(watch.Locator("#finding-outcome")).Not().ToBeEmpty())
	outcome, err := watch.Locator("#finding-outcome").TextContent()
	require.NoError(t, err)
	require.Contains(t, outcome, "Repair enqueued as message")
	screenshot(t, watch, "demo-finding-repaired")
	// Redelivered, then a later cycle finds it known and resolves the
	// finding, live.
	require.NoError(t, expect.Locator(watch.GetByTestId("finding-status")).ToHaveText("resolved",
		playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(60000)}))
	screenshot(t, watch, "demo-finding-resolved")

	// Repair the rest of the orders' drift at once: a bulk repair job,
	// confirmed, whose progress the page shows live to its end.
	watch.OnDialog(func(d playwright.Dialog) {
		if err := d.Accept(); err != nil {
			t.Errorf("accept the confirmation: %v", err)
		}
	})
	_, err = watch.Goto("/reconciliation?check=demo-orders")
	require.NoError(t, err)
	require.NoError(t, watch.GetByTestId("bulk-repair-reason").Fill("the shop lost a day"))
	require.NoError(t, watch.GetByTestId("bulk-repair-button").Click())
	require.NoError(t, expect.Locator(watch.GetByTestId("finding-notice")).ToContainText("Bulk repair started"))
	require.NoError(t, expect.Locator(watch.GetByTestId("repair-job-state")).ToHaveText("done", long))
	require.NoError(t, expect.Locator(watch.GetByTestId("repair-job-progress")).ToContainText("repaired"))
	screenshot(t, watch, "demo-bulk-repair")
	// The shop applies the repairs it receives; a later cycle resolves
	// every finding of the orders, live.
	require.NoError(t, expect.Locator(orders.GetByTestId("open-drift")).ToHaveText("0",
		playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(60000)}))
	screenshot(t, watch, "demo-bulk-repair-resolved")
}
