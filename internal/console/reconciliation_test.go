package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// reconciled gives b a table check of a small orders table against a fake
// provider that disagrees on order 2 (status) and lacks order 3, and runs
// one cycle. It returns the mismatch finding's id.
func reconciled(t *testing.T, b bundle) int64 {
	t.Helper()
	ctx := context.Background()
	remote := fakeremote.New()
	t.Cleanup(remote.Close)
	_, err := b.pool.Exec(ctx, `CREATE TABLE public.orders (id bigint PRIMARY KEY, status text NOT NULL);
		INSERT INTO public.orders VALUES (1, 'open'), (2, 'paid'), (3, 'open')`)
	require.NoError(t, err)
	remote.Put("1", map[string]any{"status": "open"})
	remote.Put("2", map[string]any{"status": "<b>refunded</b>"})
	q := queries.New(b.pool)
	require.NoError(t, q.DestinationUpsert(ctx, queries.DestinationUpsertParams{
		Name: "shop", Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12, TimeoutMs: 10000,
		Burst: 1, Concurrency: 16, BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerOpenMs: 30000,
	}))
	_, err = q.ReconcileCheckInsert(ctx, queries.ReconcileCheckInsertParams{
		Name: "orders", Kind: reconcile.KindTable, BatchSize: 100, RemoteRate: 100, TimeoutMs: 2000, IntervalMs: 3600000,
		RemoteUrl: remote.URL(), Destination: "shop", WindowMs: 1, TableSchema: "public", TableName: "orders",
		KeyColumn: "id", Columns: []string{"status"}, LeaseMs: 30000,
	})
	require.NoError(t, err)
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	ran, err := reconcile.NewRunner(b.pool, reconcile.Config{Owner: "t", Client: client}).RunOnce(ctx)
	require.NoError(t, err)
	require.True(t, ran)
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT id FROM switchyard.reconcile_findings WHERE kind = 'mismatch'").Scan(&id))
	return id
}

func page(t *testing.T, rec *httptest.ResponseRecorder) *goquery.Document {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	return doc
}

// The Reconciliation page lists the check with its cycle and the open
// findings; a finding's page shows the field diff (escaped) and its
// history, and its repair button enqueues the repair once.
func TestReconciliationPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := reconciled(t, b)

	doc := page(t, b.do(t, http.MethodGet, "/reconciliation"))
	require.Equal(t, "complete", doc.Find("[data-testid=reconcile-check] [data-testid=cycle-state]").Text())
	require.Equal(t, "2", doc.Find("[data-testid=reconcile-check] [data-testid=open-drift]").Text())
	require.Equal(t, 2, doc.Find("[data-testid=finding-row]").Length())
	live := page(t, b.do(t, http.MethodGet, "/reconciliation/live?kind=mismatch"))
	require.Equal(t, 1, live.Find("[data-testid=finding-row]").Length())
	drift := page(t, b.do(t, http.MethodGet, "/reconciliation/drift"))
	require.Equal(t, "2", drift.Find("[data-testid=drift-open]").Text(), "the dashboard's open drift")

	doc = page(t, b.do(t, http.MethodGet, "/reconciliation/findings/"+strconv.FormatInt(id, 10)))
	cells := doc.Find("[data-testid=diff-row] td")
	require.Equal(t, []string{"status", `"paid"`, `"<b>refunded</b>"`}, cells.Map(func(_ int, s *goquery.Selection) string { return s.Text() }))
	require.Equal(t, 0, doc.Find("[data-testid=finding-diff] b").Length(), "remote values are text, never markup")
	require.Equal(t, "opened", doc.Find("[data-testid=history-row] td").Eq(1).Text())

	for range 2 {
		rec := post(b, "/reconciliation/findings/"+strconv.FormatInt(id, 10)+"/repair", url.Values{"reason": {"shop shows the wrong status"}})
		doc = page(t, rec)
		require.Contains(t, doc.Find("[data-testid=finding-notice]").Text(), "message")
		require.Equal(t, "finding-changed", rec.Header().Get("HX-Trigger"))
	}
	doc = page(t, b.do(t, http.MethodGet, "/reconciliation/findings/"+strconv.FormatInt(id, 10)+"/live"))
	require.Equal(t, "repair_requested", doc.Find("[data-testid=finding-status]").Text())
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.outbox WHERE destination = 'shop'").Scan(&n))
	require.Equal(t, 1, n, "two clicks, one repair")

	var lost int64
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT id FROM switchyard.reconcile_findings WHERE kind = 'missing_remote'").Scan(&lost))
	doc = page(t, post(b, "/reconciliation/findings/"+strconv.FormatInt(lost, 10)+"/ignore", url.Values{"reason": {"test order"}}))
	require.Equal(t, "Finding ignored.", doc.Find("[data-testid=finding-notice]").Text())
	doc = page(t, post(b, "/reconciliation/findings/"+strconv.FormatInt(lost, 10)+"/ignore", url.Values{"reason": {"again"}}))
	require.Contains(t, doc.Find("[data-testid=finding-error]").Text(), "resolved or ignored")
	doc = page(t, b.do(t, http.MethodGet, "/reconciliation/findings/"+strconv.FormatInt(lost, 10)))
	require.Equal(t, "ignored", doc.Find("[data-testid=finding-status]").Text())
	require.Equal(t, 0, doc.Find("[data-testid=repair-button]").Length(), "an ignored finding offers no repair")
}

// post sends a same-origin form POST as the demo admin.
func post(b bundle, path string, form url.Values) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.RemoteAddr = "127.0.0.1:41000"
	b.e.ServeHTTP(rec, req)
	return rec
}

// With a check chosen, operators can start a bulk repair of its open
// findings: the button states the estimate and asks to confirm; the job
// shows on the page with its progress and a cancel, and, worked by a
// bulk replay runner, repairs each finding once.
func TestReconciliationBulkRepair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reconciled(t, b)
	doc := page(t, b.do(t, http.MethodGet, "/reconciliation"))
	require.Equal(t, 0, doc.Find("[data-testid=bulk-repair]").Length(), "no check chosen")
	doc = page(t, b.do(t, http.MethodGet, "/reconciliation?check=orders"))
	require.Equal(t, "Repair all 2 open findings of orders", doc.Find("[data-testid=bulk-repair-button]").Text())
	confirm, _ := doc.Find("[data-testid=bulk-repair]").Attr("hx-confirm")
	require.Equal(t, "Repair all 2 open findings of orders?", confirm)
	rid, ok := doc.Find("[data-testid=bulk-repair] input[name=request_id]").Attr("value")
	require.True(t, ok)

	doc = page(t, post(b, "/reconciliation/repair", url.Values{"check": {"orders"}, "reason": {"the shop lost a day"}, "request_id": {rid}}))
	require.Equal(t, "Bulk repair started for ~2 findings: its progress is below.", doc.Find("[data-testid=finding-notice]").Text())
	doc = page(t, post(b, "/reconciliation/repair", url.Values{"check": {"orders"}, "reason": {"again"}, "request_id": {uuid.NewString()}}))
	require.Contains(t, doc.Find("[data-testid=finding-error]").Text(), "already running")
	doc = page(t, post(b, "/reconciliation/repair", url.Values{"check": {"orders"}, "request_id": {uuid.NewString()}}))
	require.Contains(t, doc.Find("[data-testid=finding-error]").Text(), "needs a reason")

	doc = page(t, b.do(t, http.MethodGet, "/reconciliation/live?check=orders"))
	job := doc.Find("[data-testid=repair-job]")
	require.Equal(t, 1, job.Length())
	require.Equal(t, "running", job.AttrOr("data-state", ""))
	require.Equal(t, "0 repaired · 0 skipped of ~2", job.Find("[data-testid=repair-job-progress]").Text())
	require.Equal(t, 1, job.Find("[data-testid=repair-job-cancel]").Length())

	r := bulkreplay.NewRunner(b.pool, bulkreplay.Config{Poll: 10 * time.Millisecond, Logger: testlog.New(t),
		Workers: map[string]bulkreplay.Worker{bulkreplay.KindRepair: action.RepairJobWorker()}})
	require.NoError(t, r.Start(context.Background()))
	defer r.Stop()
	testwait.Until(t, 20*time.Second, "the bulk repair done", func() bool {
		doc := page(t, b.do(t, http.MethodGet, "/reconciliation/live?check=orders"))
		return doc.Find("[data-testid=repair-job]").AttrOr("data-state", "") == "done"
	})
	doc = page(t, b.do(t, http.MethodGet, "/reconciliation/live?check=orders"))
	require.Equal(t, "2 repaired · 0 skipped of ~2", doc.Find("[data-testid=repair-job-progress]").Text())
	require.Equal(t, 0, doc.Find("[data-testid=repair-job-cancel]").Length())
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.outbox WHERE destination = 'shop'").Scan(&n))
	require.Equal(t, 2, n)
}

// A running bulk repair is cancelled from the page.
func TestReconciliationRepairJobCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reconciled(t, b)
	page(t, post(b, "/reconciliation/repair", url.Values{"check": {"orders"}, "reason": {"r"}, "request_id": {uuid.NewString()}}))
	doc := page(t, b.do(t, http.MethodGet, "/reconciliation/live?check=orders"))
	id := doc.Find("[data-testid=repair-job]").AttrOr("data-job", "")
	doc = page(t, post(b, "/reconciliation/repair-jobs/"+id+"/cancel", url.Values{"request_id": {uuid.NewString()}}))
	require.Equal(t, "Bulk repair cancelled; what it repaired stays repaired.", doc.Find("[data-testid=finding-notice]").Text())
	doc = page(t, post(b, "/reconciliation/repair-jobs/"+id+"/cancel", url.Values{"request_id": {uuid.NewString()}}))
	require.Contains(t, doc.Find("[data-testid=finding-error]").Text(), "not running")
	doc = page(t, b.do(t, http.MethodGet, "/reconciliation/live?check=orders"))
	require.Equal(t, "cancelled", doc.Find("[data-testid=repair-job]").AttrOr("data-state", ""))
}

// A finding group's triage item links the group's findings, on the board
// and on the item's page.
func TestReconciliationFindingGroupTriageItem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reconciled(t, b)
	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT id FROM switchyard.triage_items WHERE kind = 'reconcile_findings' AND ref = '{"check": "orders", "kind": "mismatch"}'`).Scan(&id))
	doc := page(t, b.do(t, http.MethodGet, "/triage/items/"+strconv.FormatInt(id, 10)))
	link := doc.Find("[data-testid=tracked-link]")
	require.Equal(t, "findings of orders (mismatch)", link.Text())
	href, _ := link.Attr("href")
	require.Equal(t, "/reconciliation?check=orders&kind=mismatch", href)

	board := page(t, b.do(t, http.MethodGet, "/triage"))
	require.Equal(t, 2, board.Find("[data-testid=triage-card]").Length(), "mismatch and missing_remote")
	hrefs := board.Find("[data-testid=triage-tracked-link]").Map(func(_ int, s *goquery.Selection) string { h, _ := s.Attr("href"); return h })
	require.ElementsMatch(t, []string{"/reconciliation?check=orders&kind=mismatch", "/reconciliation?check=orders&kind=missing_remote"}, hrefs)
}
