package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
	"github.com/switchyard/switchyard/internal/testwait"
)

// Drift injected at the external system appears on the open
// Reconciliation page without a reload (the runner's change-feed rows
// reach the console's stream), and a repair from the finding's page
// enqueues one outbox row and shows it.
func TestReconciliationDriftAppearsLiveAndIsRepaired(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	remote := fakeremote.New()
	t.Cleanup(remote.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE public.orders (id bigint PRIMARY KEY, status text NOT NULL, total integer NOT NULL);
		INSERT INTO public.orders SELECT i, 'open', i * 10 FROM generate_series(1, 50) i;
		INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	for i := 1; i <= 50; i++ {
		remote.Put(strconv.Itoa(i), map[string]any{"status": "open", "total": i * 10})
	}
	q := queries.New(pool)
	check, err := q.ReconcileCheckInsert(ctx, queries.ReconcileCheckInsertParams{
		Name: "orders", Kind: reconcile.KindTable, BatchSize: 20, RemoteRate: 100, TimeoutMs: 2000, IntervalMs: 3600000,
		RemoteUrl: remote.URL(), Destination: "shop", Topic: "order.state", WindowMs: 1, TableSchema: "public",
		TableName: "orders", KeyColumn: "id", Columns: []string{"status", "total"}, LeaseMs: 30000,
	})
	require.NoError(t, err)
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	runner := reconcile.NewRunner(pool, reconcile.Config{Owner: "e2e", Client: client})
	// cycle runs one more complete cycle: this runner or, once the console
	// is up, its own reconciler (console serve runs one) may take it.
	cycle := func() {
		t.Helper()
		var before, after int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM switchyard.reconcile_cycles WHERE state = 'complete'").Scan(&before))
		require.NoError(t, q.ReconcileCheckRunNow(ctx, check))
		testwait.Until(t, 30*time.Second, "a complete cycle", func() bool {
			_, err := runner.RunOnce(ctx)
			require.NoError(t, err)
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM switchyard.reconcile_cycles WHERE state = 'complete'").Scan(&after))
			return after > before
		})
	}
	cycle()

	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"})
	t.Cleanup(func() { console.Stop(t) })
	page := newPage(t, console.URL)
	expect := newExpect()
	// The region is re-fetched when the stream says "ready": once that
	// response came, the stream is open and later drift can only arrive live.
	_, err = page.ExpectResponse(regexp.MustCompile(`/reconciliation/live`), func() error {
		_, err := page.Goto("/reconciliation")
		return err
	})
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("cycle-state")).ToHaveText("complete"))
	rows := page.GetByTestId("finding-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(0))
	_, err = page.Evaluate(`() => { window.notReloaded = true }`)
	require.NoError(t, err)

	remote.Alter("17", "total", 9999)
	remote.Drop("33")
	cycle()
	live := playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(expectTimeout)}
	require.NoError(t, expect.Locator(rows).ToHaveCount(2, live), "the drift did not appear live")
	require.NoError(t, expect.Locator(page.GetByTestId("open-drift")).ToHaveText("2"))
	still, err := page.Evaluate(`() => window.notReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, still, "the page was reloaded")
	screenshot(t, page, "reconciliation-live")

	// The dashboard shows the open drift per check.
	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("drift-open")).ToHaveText("2"))
	screenshot(t, page, "reconciliation-dashboard")

	// Each finding group is a triage item on the board, linked to the
	// group's findings; its page links them too.
	_, err = page.Goto("/triage")
	require.NoError(t, err)
	card := page.GetByTestId("triage-card").Filter(playwright.LocatorFilterOptions{HasText: "entities mismatched"})
	require.NoError(t, expect.Locator(card).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("triage-card").Filter(playwright.LocatorFilterOptions{HasText: "entities missing remotely"})).ToHaveCount(1))
	require.NoError(t, expect.Locator(card.GetByTestId("triage-tracked-link")).ToHaveAttribute("href", "/reconciliation?check=orders&kind=mismatch"))
	require.NoError(t, expect.Locator(card.GetByTestId("item-status")).ToHaveText("open"))
	screenshot(t, page, "reconciliation-triage-board")
	require.NoError(t, card.GetByTestId("triage-item-link").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText("Reconciliation orders: entities mismatched"))
	require.NoError(t, expect.Locator(page.GetByTestId("triage-history")).ToContainText("1 new mismatch findings"))
	screenshot(t, page, "reconciliation-triage-item")
	require.NoError(t, page.GetByTestId("tracked-link").Click())
	require.NoError(t, expect.Locator(rows).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.Locator("[data-testid=finding-row][data-kind=mismatch]")).ToHaveCount(1))

	_, err = page.Goto("/reconciliation")
	require.NoError(t, err)

	require.NoError(t, page.Locator(`[data-testid=finding-row][data-kind=mismatch] [data-testid=finding-link]`).Click())
	require.NoError(t, expect.Locator(page.GetByTestId("diff-row")).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("diff-row").Locator("td").Nth(2)).ToHaveText("9999"))
	screenshot(t, page, "reconciliation-finding")
	require.NoError(t, page.GetByTestId("repair-reason").Fill("the shop lost our last update"))
	// The live region refreshes under a half-typed reason (a cycle ends,
	// another operator acts): the reason is kept (hx-preserve).
	refreshed, err := page.Evaluate(`() => new Promise(resolve => {
		document.getElementById("finding-region").addEventListener("htmx:afterSettle", () => resolve(true), {once: true})
		document.body.dispatchEvent(new Event("finding-changed"))
	})`)
	require.NoError(t, err)
	require.Equal(t, true, refreshed)
	require.NoError(t, expect.Locator(page.GetByTestId("repair-reason")).ToHaveValue("the shop lost our last update"))
	require.NoError(t, page.GetByTestId("repair-button").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("finding-status")).ToHaveText("repair_requested"))
	require.NoError(t, expect.Locator(page.GetByTestId("finding-notice")).ToContainText("Repair enqueued as message"))
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToHaveCount(2))
	screenshot(t, page, "reconciliation-repaired")
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM switchyard.outbox WHERE destination = 'shop' AND payload->>'key' = '17'").Scan(&n))
	require.Equal(t, 1, n)
}
