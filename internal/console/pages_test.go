package console_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/queries"
)

// seedMessages writes n delivered messages (ids 1..n) and returns nothing:
// the tests know the ids.
func seedMessages(t *testing.T, b bundle, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload, state, finished_at)
		SELECT 'order.paid', 'shop', 'order', (i % 3)::text, jsonb_build_object('i', i, 'big', repeat('x', $2)), 'delivered', now()
		FROM generate_series(1, $1::int) AS i`, n, 70<<10)
	require.NoError(t, err)
}

func rowIDs(t *testing.T, body string) []string {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	require.NoError(t, err)
	var ids []string
	doc.Find("[data-testid=message-row] td:first-child").Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, strings.TrimSpace(s.Text()))
	})
	return ids
}

// Keyset pages: newest first, the next page starts below the last row,
// and the page before the second is the first again.
func TestMessagesListKeysetPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedMessages(t, b, 120)

	first := rowIDs(t, b.do(t, http.MethodGet, "/messages").Body.String())
	require.Len(t, first, 50)
	require.Equal(t, "120", first[0])
	require.Equal(t, "71", first[49])
	second := rowIDs(t, b.do(t, http.MethodGet, "/messages?before=71").Body.String())
	require.Equal(t, "70", second[0])
	require.Equal(t, "21", second[49])
	back := rowIDs(t, b.do(t, http.MethodGet, "/messages?after=70").Body.String())
	require.Equal(t, first, back)
	last := rowIDs(t, b.do(t, http.MethodGet, "/messages?before=21").Body.String())
	require.Len(t, last, 20)
	// Filters travel through the pages: aggregate order/1 is ids 1, 4, ...
	agg := rowIDs(t, b.do(t, http.MethodGet, "/messages?aggregate_type=order&aggregate_id=1").Body.String())
	require.Len(t, agg, 40)
	require.Equal(t, "118", agg[0])
	require.Equal(t, "1", agg[39])
	// The page above its oldest message is short: the first page again.
	require.Equal(t, agg, rowIDs(t, b.do(t, http.MethodGet, "/messages?aggregate_type=order&aggregate_id=1&after=1").Body.String()))
	// The query under it, oldest first from above the cursor.
	kind, id := "order", "1"
	newer, err := queries.New(b.pool).ConsoleMessagesListAggregateNewer(context.Background(), queries.ConsoleMessagesListAggregateNewerParams{
		AggregateType: &kind, AggregateID: &id, Floor: 0, Ceiling: math.MaxInt64, Cursor: 1, MaxRows: 4})
	require.NoError(t, err)
	var newerIDs []int64
	for _, m := range newer {
		newerIDs = append(newerIDs, m.ID)
	}
	require.Equal(t, []int64{4, 7, 10, 13}, newerIDs)
}

func TestMessagesListRejectsBadFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{
		"/messages?state=lost", "/messages?from=yesterday", "/messages?before=x",
		"/messages?before=3&after=4", "/messages?id=not-an-id",
	} {
		require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, path).Code, path)
	}
}

// A large payload is cut on the page and whole in the download, which is
// an attachment.
func TestMessagePayloadTruncatedWithRawDownload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedMessages(t, b, 1)

	page := b.do(t, http.MethodGet, "/messages/1")
	require.Equal(t, http.StatusOK, page.Code)
	doc, err := goquery.NewDocumentFromReader(page.Body)
	require.NoError(t, err)
	require.Equal(t, 1, doc.Find("[data-testid=payload-truncated]").Length())
	require.LessOrEqual(t, len(doc.Find("[data-testid=payload]").Text()), 64<<10+4)

	raw := b.do(t, http.MethodGet, "/messages/1/payload")
	require.Equal(t, http.StatusOK, raw.Code)
	require.Equal(t, `attachment; filename="message-1.json"`, raw.Header().Get("Content-Disposition"))
	require.Equal(t, "application/json", raw.Header().Get("Content-Type"))
	require.Equal(t, "nosniff", raw.Header().Get("X-Content-Type-Options"))
	require.Greater(t, raw.Body.Len(), 70<<10)

	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/messages/2").Code)
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/messages/2/payload").Code)
	var key string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT message_id::text FROM switchyard.outbox WHERE id = 1`).Scan(&key))
	found := b.do(t, http.MethodGet, "/m/"+key)
	require.Equal(t, http.StatusSeeOther, found.Code)
	require.Equal(t, "/messages/1", found.Header().Get("Location"))
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/m/00000000-0000-0000-0000-000000000000").Code)
}

// The "N new" control counts the matching messages above the first row.
func TestMessagesNewCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedMessages(t, b, 30)
	body := b.do(t, http.MethodGet, "/messages/new?above=25").Body.String()
	require.Contains(t, body, "5")
	require.Contains(t, body, "new messages")
	body = b.do(t, http.MethodGet, "/messages/new?above=25&aggregate_type=order&aggregate_id=1").Body.String()
	require.Contains(t, body, "1")
	require.Contains(t, body, "new message: show")
	rec := b.do(t, http.MethodGet, "/messages/new?above=30")
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotContains(t, rec.Body.String(), "new")
}

// An error search walks one window of ids per page, says so, and its next
// page searches the window below.
func TestMessagesErrorSearchWindows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, last_error)
		SELECT 'order.paid', 'shop', '{}', 'pending', CASE WHEN i % 1000 = 0 THEN 'boom ' || i END
		FROM generate_series(1, 60000) AS i`)
	require.NoError(t, err)

	// One window is searchWindow (25,000) ids: 60000 down to 35001.
	first := b.do(t, http.MethodGet, "/messages?error=boom")
	ids := rowIDs(t, first.Body.String())
	require.Len(t, ids, 25)
	require.Equal(t, "60000", ids[0])
	require.Equal(t, "36000", ids[24])
	doc, err := goquery.NewDocumentFromReader(first.Body)
	require.NoError(t, err)
	require.Contains(t, doc.Find("[data-testid=search-window]").Text(), "Searched messages 35001 to 60000")
	next, ok := doc.Find("[data-testid=page-older]").Attr("href")
	require.True(t, ok)
	require.Equal(t, "/messages?before=35001&error=boom", next)
	rest := rowIDs(t, b.do(t, http.MethodGet, next).Body.String())
	require.Len(t, rest, 25)
	require.Equal(t, "35000", rest[0])
	require.Equal(t, "11000", rest[24])
}
