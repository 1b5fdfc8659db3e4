package e2e

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/web/templates"
)

// TestOnCallUnblocksRestoresAndCountsDeadOnce walks issue 14's items 5, 7,
// 8, 10 and 2 with one console and one outage, checking each number it
// reads against the database:
//   - item 5: a blocked aggregate's head is discarded from its row, with a
//     reason, after the confirmation the page asks (dismissed first:
//     nothing happens), and the aggregate flows again; "Replay the heads of
//     all blocked aggregates…" opens bulk replay filled for blocked heads,
//     whose job replays each remaining head once;
//   - item 7: the state filter lists the discarded head, whose row leads to
//     it; it is restored from there; "replayed" lists the replayed heads;
//   - item 8: the actions page shows the message's headers and its last
//     attempts beside the buttons (the cancel dialog of a bulk job is
//     TestBulkReplayShowsLiveProgressAndCancels's);
//   - item 2: after the replays, the dashboard's Dead tile, its per-topic
//     table and the dead-letter groups agree with the database, and
//     "dead" lists no original whose replay was delivered;
//   - item 10: topic and destination prefixes filter the list, whose total
//     is exact on one page and "about N" (the planner's estimate) beyond;
//     its "N new" control counts by the same prefixes.
func TestOnCallUnblocksRestoresAndCountsDeadOnce(t *testing.T) {
	t.Parallel()
	console, receiver := startConsoleWithReceiver(t)
	pool := console.pool
	ctx := context.Background()

	// The outage: dead messages on two topics, and three aggregates whose
	// heads die and block the messages behind them. Billing is disabled:
	// its 60 messages stay pending, for the prefix and the estimate.
	enqueue(t, pool, "hook", 3) // order.created
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 'payment.failed', 'hook', jsonb_build_object('p', g) FROM generate_series(1, 2) g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, headers, payload)
		SELECT 'order.paid', 'hook', 'order', 'o-' || (g % 3), json_build_object('trace-id', 'trace-' || g), jsonb_build_object('order', g)
		FROM generate_series(1, 6) g ORDER BY g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, disabled) VALUES ('billing', 'webhook', 'http://127.0.0.1:9/', true)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 'order.archived', 'billing', jsonb_build_object('a', g) FROM generate_series(1, 60) g`)
	require.NoError(t, err)
	testwait.Until(t, time.Minute, "eight dead letters and three blocked aggregates", func() bool {
		return count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead'`) == 8 &&
			count(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`) == 3
	})
	receiver.healed.Store(true)

	page := signedIn(t, console, "operator", "/aggregates/blocked")
	require.NoError(t, page.SetViewportSize(1400, 900))
	head := discardBlockedHead(t, pool, page)
	replayBlockedHeads(t, pool, page)
	restoreDiscarded(t, pool, page, head)
	deadCountedOnce(t, pool, page)
	prefixFilters(t, pool, page)
}

// discardBlockedHead is item 5's first half: aggregate o-1's head is
// discarded from its row with a reason, once the confirmation is accepted,
// and the message behind it is delivered. It returns the head's id.
func discardBlockedHead(t *testing.T, pool *pgxpool.Pool, page playwright.Page) int64 {
	t.Helper()
	expect := newExpect()
	var head, follower int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT min(id), max(id) FROM switchyard.outbox WHERE aggregate_id = 'o-1'`).Scan(&head, &follower))
	rows := page.GetByTestId("blocked-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(3))
	row := rows.Filter(playwright.LocatorFilterOptions{Has: page.Locator(fmt.Sprintf(`a[href="/messages/%d"]`, head))})
	require.NoError(t, row.GetByTestId("head-reason").Fill("order o-1 was cancelled upstream"))
	screenshot(t, page, "oncall-lists-blocked")

	var asked atomic.Value
	var accept atomic.Bool
	page.OnDialog(func(d playwright.Dialog) {
		asked.Store(d.Message())
		answer := d.Dismiss
		if accept.Load() {
			answer = func() error { return d.Accept() }
		}
		if err := answer(); err != nil {
			t.Errorf("answer the confirmation: %v", err)
		}
	})
	require.NoError(t, row.GetByTestId("head-discard").Click())
	testwait.Until(t, 20*time.Second, "the confirmation asked", func() bool { return asked.Load() != nil })
	require.Contains(t, asked.Load(), fmt.Sprintf("Discard message %d?", head))
	require.NoError(t, expect.Locator(rows).ToHaveCount(3))
	require.Equal(t, "dead", stateOf(t, pool, head), "dismissed: nothing changes")

	accept.Store(true)
	require.NoError(t, row.GetByTestId("head-discard").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-result")).ToContainText("Discarded"))
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-result")).ToContainText("the aggregate flows again"))
	require.NoError(t, expect.Locator(rows).ToHaveCount(2))
	require.Equal(t, "discarded", stateOf(t, pool, head))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.audit_log
		WHERE action = 'message.discard' AND target = $1 AND reason = 'order o-1 was cancelled upstream' AND actor = 'operator'`, fmt.Sprintf("message %d", head)))
	testwait.Until(t, time.Minute, "the message behind the discarded head delivered", func() bool {
		return stateOf(t, pool, follower) == "delivered"
	})
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`))
	screenshot(t, page, "oncall-lists-discarded-head")
	return head
}

// stateOf is message id's state in the database.
func stateOf(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state FROM switchyard.outbox WHERE id = $1`, id).Scan(&s))
	return s
}

// replayBlockedHeads is item 5's second half: "Replay the heads of all
// blocked aggregates…" opens bulk replay filled for blocked heads; its job
// replays each remaining head once, and nothing is blocked any more.
func replayBlockedHeads(t *testing.T, pool *pgxpool.Pool, page playwright.Page) {
	t.Helper()
	expect := newExpect()
	heads := ids(t, pool, `SELECT dead_message_id FROM switchyard.outbox_blocked_aggregates ORDER BY 1`)
	require.Len(t, heads, 2)
	require.NoError(t, page.GetByTestId("blocked-bulk-replay").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/replays\?blocked_heads=true$`)))
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-blocked-heads")).ToBeChecked())
	require.NoError(t, page.GetByTestId("bulk-estimate").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-estimate-count")).ToHaveText(fmt.Sprintf("%d dead messages match.", len(heads))))
	screenshot(t, page, "oncall-lists-heads-estimate")
	require.NoError(t, page.GetByTestId("bulk-start").Click())
	job := page.GetByTestId("replay-job")
	require.NoError(t, expect.Locator(job.GetByTestId("job-delivered")).ToHaveText(fmt.Sprintf("%d delivered", len(heads))))
	require.NoError(t, expect.Locator(job.GetByTestId("job-pending")).ToHaveText("0 pending"))
	screenshot(t, page, "oncall-lists-heads-replayed")
	for _, h := range heads {
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, h), "one replay of head %d", h)
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1 AND replay_job IS NOT NULL AND state = 'delivered'`, h))
	}
	require.Equal(t, len(heads), count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`), "only the heads replayed")
	_, err := page.Goto("/aggregates/blocked")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-row")).ToHaveCount(0))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`))
}

// restoreDiscarded is items 7 and 8: the state filter lists the discarded
// head; its row leads to it, its actions page shows its headers and last
// attempts beside the buttons, and it is restored among the dead letters;
// "replayed" lists the replayed heads, delivered.
func restoreDiscarded(t *testing.T, pool *pgxpool.Pool, page playwright.Page, head int64) {
	t.Helper()
	expect := newExpect()
	_, err := page.Goto("/messages")
	require.NoError(t, err)
	_, err = page.GetByTestId("filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"discarded"}})
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("filter-apply").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`[?&]state=discarded(&|$)`)))
	rows := page.GetByTestId("message-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'discarded'`)))
	require.NoError(t, expect.Locator(rows).ToHaveCount(1))
	require.NoError(t, expect.Locator(rows).ToContainText("discarded"))
	screenshot(t, page, "oncall-lists-discarded")
	require.NoError(t, rows.Locator(fmt.Sprintf(`a[href="/messages/%d"]`, head)).Click())
	require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText(fmt.Sprintf("Message %d", head)))
	require.NoError(t, expect.Locator(page.GetByTestId("message-status")).ToContainText("discarded"))
	require.NoError(t, page.GetByTestId("message-actions-link").Click())

	// Item 8: headers and last attempts beside the buttons.
	recent := page.GetByTestId("message-recent")
	var trace string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT headers->>'trace-id' FROM switchyard.outbox WHERE id = $1`, head).Scan(&trace))
	require.NoError(t, expect.Locator(recent.GetByTestId("headers").Locator("tr th")).ToHaveText([]string{"trace-id"}))
	require.NoError(t, expect.Locator(recent.GetByTestId("headers").Locator("tr td")).ToHaveText([]string{trace}))
	attempts := count(t, pool, `SELECT count(*) FROM switchyard.outbox_attempt_log WHERE message_id = $1`, head)
	require.Positive(t, attempts)
	require.NoError(t, expect.Locator(recent.GetByTestId("attempt-row")).ToHaveCount(attempts))
	require.NoError(t, expect.Locator(recent.GetByTestId("attempts")).ToContainText("422"))
	require.NoError(t, expect.Locator(page.GetByTestId("restore-submit")).ToBeVisible())
	screenshot(t, page, "oncall-lists-actions-discarded")

	require.NoError(t, page.Locator(`[data-testid="form/restore"] input[name="reason"]`).Fill("discarded by mistake"))
	require.NoError(t, page.GetByTestId("restore-submit").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("action-notice")).ToBeVisible())
	require.NoError(t, expect.Locator(page.GetByTestId("message-state")).ToHaveText("dead"))
	require.NoError(t, expect.Locator(page.GetByTestId("replay-submit")).ToBeVisible())
	require.Equal(t, "dead", stateOf(t, pool, head))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'message.restore' AND target = $1 AND reason = 'discarded by mistake'`,
		fmt.Sprintf("message %d", head)))
	screenshot(t, page, "oncall-lists-restored")

	_, err = page.Goto("/messages?state=discarded")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows).ToHaveCount(0))
	_, err = page.Goto("/messages?state=replayed")
	require.NoError(t, err)
	replayed := count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND replays > 0`)
	require.Equal(t, 2, replayed)
	require.NoError(t, expect.Locator(rows.GetByTestId("replay-outcome")).ToHaveText([]string{"→ delivered", "→ delivered"}))
	require.NoError(t, expect.Locator(page.GetByTestId("messages-total")).ToHaveText(fmt.Sprintf("%d messages", replayed)))
}

// deadCountedOnce is item 2: after the replays, the dashboard's Dead tile,
// the sum of its per-topic table and the dead-letter groups' total are the
// database's dead and unresolved messages, which are what "dead" lists.
func deadCountedOnce(t *testing.T, pool *pgxpool.Pool, page playwright.Page) {
	t.Helper()
	expect := newExpect()
	unresolved := `FROM switchyard.outbox WHERE state = 'dead' AND replays = 0`
	dead := count(t, pool, `SELECT count(*) `+unresolved)
	require.Equal(t, 6, dead, "three order.created, two payment.failed, the restored head")
	_, err := page.Goto("/")
	require.NoError(t, err)
	// The statistics are maintained behind the writes: the live updates
	// bring them, each assertion waits for its figure.
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead-value")).ToHaveText(strconv.Itoa(dead)))
	flows := page.GetByTestId("flows")
	perTopic := groupCounts(t, pool, `SELECT destination || ' ' || topic, count(*) `+unresolved+` GROUP BY 1`)
	require.Len(t, perTopic, 3)
	for key, n := range perTopic {
		var dest, topic string
		_, err := fmt.Sscan(key, &dest, &topic)
		require.NoError(t, err)
		href := "/messages?" + url.Values{"destination": {dest}, "topic": {topic}, "state": {"dead"}}.Encode()
		require.NoError(t, expect.Locator(flows.Locator(fmt.Sprintf(`a[href=%q]`, href))).ToHaveText(strconv.Itoa(n)), key)
	}
	require.Equal(t, dead, sumOf(t, flows.Locator(`a[href*="state=dead"]`)), "the per-topic table sums to the tile")
	screenshot(t, page, "oncall-lists-dashboard")

	_, err = page.Goto("/dead-letters")
	require.NoError(t, err)
	groups := groupCounts(t, pool, `SELECT error_fingerprint, count(*) `+unresolved+` GROUP BY 1`)
	require.NoError(t, expect.Locator(page.GetByTestId("dead-letter-group")).ToHaveCount(len(groups)))
	for fp, n := range groups {
		row := page.GetByTestId("dead-letter-group").Filter(playwright.LocatorFilterOptions{HasText: fp})
		require.NoError(t, expect.Locator(row.GetByTestId("group-dead")).ToHaveText(strconv.Itoa(n)), fp)
	}
	require.Equal(t, dead, sumOf(t, page.GetByTestId("group-dead")), "the groups total the tile")
	screenshot(t, page, "oncall-lists-dead-letters")

	_, err = page.Goto("/messages?state=dead")
	require.NoError(t, err)
	rows := page.GetByTestId("message-row")
	require.NoError(t, expect.Locator(rows).ToHaveCount(dead))
	require.NoError(t, expect.Locator(page.GetByTestId("messages-total")).ToHaveText(fmt.Sprintf("%d messages", dead)))
	listed, err := rows.Locator("td:first-child").AllTextContents()
	require.NoError(t, err)
	want := ids(t, pool, `SELECT id `+unresolved+` ORDER BY id DESC`)
	require.Equal(t, idTexts(want), listed)
	for _, id := range ids(t, pool, `SELECT DISTINCT replay_of FROM switchyard.outbox WHERE replay_of IS NOT NULL AND state = 'delivered'`) {
		require.NotContains(t, listed, strconv.FormatInt(id, 10), "an original whose replay was delivered")
	}
}

// prefixFilters is item 10: a topic prefix typed in the filter form
// matches its topics and no other, counted exactly on one page; a
// destination prefix with more matches than a page shows the planner's
// estimate, "about N".
func prefixFilters(t *testing.T, pool *pgxpool.Pool, page playwright.Page) {
	t.Helper()
	expect := newExpect()
	_, err := page.Goto("/messages?state=dead")
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("filter-topic").Fill("order."))
	require.NoError(t, page.GetByTestId("filter-apply").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`[?&]topic=order\.(&|$)`)))
	rows := page.GetByTestId("message-row")
	n := count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND replays = 0 AND topic LIKE 'order.%'`)
	require.Equal(t, 4, n)
	require.NoError(t, expect.Locator(rows).ToHaveCount(n))
	require.NoError(t, expect.Locator(rows.Filter(playwright.LocatorFilterOptions{HasText: "order.created"})).ToHaveCount(3))
	require.NoError(t, expect.Locator(rows.Filter(playwright.LocatorFilterOptions{HasText: "order.paid"})).ToHaveCount(1))
	total := page.GetByTestId("messages-total")
	require.NoError(t, expect.Locator(total).ToHaveText(fmt.Sprintf("%d messages", n)))
	require.NoError(t, expect.Locator(total).ToHaveAttribute("data-exact", ""))
	screenshot(t, page, "oncall-lists-topic-prefix")

	// Sixty billing messages: more than a page, so the total is estimated.
	_, err = pool.Exec(context.Background(), `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	// The "N new" control counts by the same prefixes: the replays, newer
	// but of another destination, are not new to this list.
	_, err = page.ExpectResponse(regexp.MustCompile(`/messages/new\?`), func() error {
		_, err := page.Goto("/messages?" + url.Values{"topic": {"order."}, "destination": {"bill*"}}.Encode())
		return err
	})
	require.NoError(t, err, "the list's first check for new messages")
	require.Positive(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE id > (SELECT max(id) FROM switchyard.outbox WHERE destination = 'billing')`))
	require.NoError(t, expect.Locator(page.GetByTestId("new-messages-link")).ToHaveCount(0))
	require.NoError(t, expect.Locator(rows).ToHaveCount(50))
	require.NoError(t, expect.Locator(rows.Filter(playwright.LocatorFilterOptions{HasText: "billing"})).ToHaveCount(50))
	require.NoError(t, expect.Locator(total).ToHaveText(regexp.MustCompile(`^about \d+ messages$`)))
	require.NoError(t, expect.Locator(total).Not().ToHaveAttribute("data-exact", ""))
	var estimate int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT switchyard.console_messages_estimate(
		NULL, NULL, 'order.', NULL, 'bill', NULL, NULL, NULL, NULL, NULL)`).Scan(&estimate))
	exact := count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE topic LIKE 'order.%' AND destination LIKE 'bill%'`)
	require.Equal(t, 60, exact)
	require.NoError(t, expect.Locator(total).ToHaveText(templates.ListTotal{Count: max(estimate, 50)}.Label()))
	require.InDelta(t, exact, estimate, float64(exact)/2, "the estimate is near the count")
	screenshot(t, page, "oncall-lists-estimate")
}

// ids reads a column of message ids.
func ids(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// groupCounts reads (key, count) rows into a map.
func groupCounts(t *testing.T, pool *pgxpool.Pool, sql string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// sumOf adds the integers the located elements show.
func sumOf(t *testing.T, l playwright.Locator) int {
	t.Helper()
	texts, err := l.AllTextContents()
	require.NoError(t, err)
	sum := 0
	for _, s := range texts {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "a count: %q", s)
		sum += n
	}
	return sum
}

func idTexts(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}
