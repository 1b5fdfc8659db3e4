package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

// seedPrefixMessages writes 600 messages over topics and destinations that
// share prefixes, a third of them dead, and analyzes the table.
func seedPrefixMessages(t *testing.T, b bundle) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop-eu', 'function'), ('shop-us', 'function'), ('bill', 'function'), ('shop', 'function')`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, attempts, last_error, finished_at)
		SELECT (ARRAY['order.created', 'order.paid', 'order', 'orderly.x', 'invoice.sent', 'order.paid.v2'])[(i / 3) % 6 + 1],
			(ARRAY['shop-eu', 'shop-us', 'bill', 'shop'])[(i / 2) % 4 + 1], '{}',
			CASE WHEN i % 3 = 0 THEN 'dead' ELSE 'delivered' END, 1,
			CASE WHEN i % 3 = 0 THEN 'HTTP 503' END, now()
		FROM generate_series(1, 600) AS i`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
}

var olderLink = regexp.MustCompile(`href="([^"]+)"[^>]*data-testid="page-older"`)

// walkList follows a list's older links from path to the end and returns
// every row id shown, in order.
func walkList(t *testing.T, b bundle, path string) []string {
	t.Helper()
	var ids []string
	for range 20 {
		rec := b.do(t, http.MethodGet, path)
		require.Equal(t, http.StatusOK, rec.Code, path)
		ids = append(ids, rowIDs(t, rec.Body.String())...)
		m := olderLink.FindStringSubmatch(rec.Body.String())
		if m == nil {
			return ids
		}
		path = html.UnescapeString(m[1])
	}
	t.Fatalf("%s: more than 20 pages", path)
	return nil
}

func wantIDs(t *testing.T, b bundle, where string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT o.id::text FROM switchyard.outbox o WHERE `+where+` ORDER BY o.id DESC`)
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, ids, where)
	return ids
}

// Issue 14, item 10: a topic or destination ending in "*" or "." is a
// prefix, on every access path (the prefix index paths under a state that
// is not delivered, the id windows otherwise), through every page; a name
// without one matches itself only.
func TestMessagesListFiltersByPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedPrefixMessages(t, b)
	for _, c := range []struct{ path, where string }{
		{"/messages?state=dead&topic=order.*", `state = 'dead' AND topic LIKE 'order.%'`},
		{"/messages?state=dead&topic=order.", `state = 'dead' AND topic LIKE 'order.%'`},
		{"/messages?topic=order.", `topic LIKE 'order.%'`},
		{"/messages?state=dead&destination=shop-*", `state = 'dead' AND destination LIKE 'shop-%'`},
		{"/messages?destination=shop-*", `destination LIKE 'shop-%'`},
		{"/messages?state=dead&topic=order.*&destination=shop-*", `state = 'dead' AND topic LIKE 'order.%' AND destination LIKE 'shop-%'`},
		{"/messages?state=dead&topic=order.paid", `state = 'dead' AND topic = 'order.paid'`},
		{"/messages?topic=order.paid", `topic = 'order.paid'`},
	} {
		require.Equal(t, wantIDs(t, b, c.where), walkList(t, b, c.path), c.path)
	}
	// The page above the second one is the first again, on the prefix path.
	want := wantIDs(t, b, `state = 'dead' AND topic LIKE 'order.%'`)
	require.Greater(t, len(want), 50, "two pages")
	first := rowIDs(t, b.do(t, http.MethodGet, "/messages?topic=order.*&state=dead").Body.String())
	require.Equal(t, want[:50], first)
	second := rowIDs(t, b.do(t, http.MethodGet, "/messages?topic=order.*&state=dead&before="+first[49]).Body.String())
	require.Equal(t, want[50:min(100, len(want))], second)
	back := rowIDs(t, b.do(t, http.MethodGet, "/messages?topic=order.*&state=dead&after="+second[0]).Body.String())
	require.Equal(t, first, back)
	// The "N new" control counts above the first row by the same prefix: a
	// newer message of another topic is not new to this list.
	var top int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT max(id) FROM switchyard.outbox WHERE topic LIKE 'order.%'`).Scan(&top))
	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 'payment.settled', destination, '{}' FROM switchyard.outbox LIMIT 1`)
	require.NoError(t, err)
	newer := b.do(t, http.MethodGet, fmt.Sprintf("/messages/new?above=%d&topic=order.*", top))
	require.Equal(t, http.StatusOK, newer.Code)
	require.NotContains(t, newer.Body.String(), "new-messages-link")
	require.Contains(t, b.do(t, http.MethodGet, fmt.Sprintf("/messages/new?above=%d&topic=payment.*", top)).Body.String(), "1 new message")
	// A bulk replay takes the prefix as the list means it.
	body := b.do(t, http.MethodGet, "/messages?topic=order.*&state=dead").Body.String()
	require.Contains(t, body, `href="/replays?topic=order.%2A"`)
	require.Contains(t, b.do(t, http.MethodGet, "/messages?topic=order.paid&state=dead").Body.String(), `data-testid="messages-bulk-replay"`)
}

func listTotal(t *testing.T, b bundle, path string) (string, bool) {
	t.Helper()
	rec := b.do(t, http.MethodGet, path)
	require.Equal(t, http.StatusOK, rec.Code, path)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	s := doc.Find("[data-testid=messages-total]")
	require.Equal(t, 1, s.Length(), path)
	_, exact := s.Attr("data-exact")
	return strings.TrimSpace(s.Text()), exact
}

// A list that fits on its page counts its rows exactly; a longer one shows
// the planner's estimate as "about N", never below the rows shown.
func TestMessagesListShowsAnEstimatedTotal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedPrefixMessages(t, b)
	text, exact := listTotal(t, b, "/messages?state=dead&topic=order.paid")
	require.True(t, exact)
	require.Equal(t, fmt.Sprintf("%d messages", len(wantIDs(t, b, `state = 'dead' AND topic = 'order.paid'`))), text)

	text, exact = listTotal(t, b, "/messages")
	require.False(t, exact)
	require.Equal(t, "about 600 messages", text, "the planner knows the analyzed table's size")
	text, exact = listTotal(t, b, "/messages?before=100")
	require.False(t, exact)
	require.Regexp(t, `^about \d+ messages$`, text)
	text, _ = listTotal(t, b, "/messages?topic=order.*")
	require.Regexp(t, `^about \d+ messages$`, text)
	var n int
	_, err := fmt.Sscanf(text, "about %d messages", &n)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 50, "never fewer than the page shows")

	rec := b.do(t, http.MethodGet, "/messages?id=1")
	require.NotContains(t, rec.Body.String(), `data-testid="messages-total"`)
}
