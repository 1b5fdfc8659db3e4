package e2e

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// atWidths checks the page's layout (requireLayout) and takes its
// screenshot at each of widths, then leaves it at the first.
func atWidths(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	for _, w := range slices.Concat(widths[1:], widths[:1]) {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		requireLayout(t, page, name, w.width)
		screenshot(t, page, "oncall-path-"+name+"-"+w.name)
	}
}

// deadGroups is the dashboard's note of how many dead-letter groups hold
// dead messages, as the database counts them.
func deadGroups(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	n := number(t, pool, `SELECT count(DISTINCT error_fingerprint) FROM switchyard.outbox WHERE state = 'dead' AND replays = 0`)
	if n == "1" {
		return "1 error group"
	}
	return n + " error groups"
}

var deadLettersLiveFetch = regexp.MustCompile(`/dead-letters/groups$`)

// number reads one integer from the database.
func number(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	return strconv.Itoa(count(t, pool, sql, args...))
}

// TestOnCallPathEndToEnd walks issue 14's on-call path as one engineer
// would, at 1400, 800 and 390 px, and checks every number it reads against
// the database: the destination breaks (every delivery refused), the dead
// letters arrive live on the dead-letter page the engineer keeps open, as
// one group whose count reaches the database's without a reload; the
// dashboard shows them and leads to their group, the group to a message
// whose error and attempt the engineer reads; the destination is fixed; one
// message is replayed and followed until delivered; the rest of the group
// goes as one bulk job whose outcome settles; the message list (a topic
// prefix) shows every original replayed; the inbox shows its failed event;
// the audit shows both replays; the blocked aggregates are gone.
func TestOnCallPathEndToEnd(t *testing.T) {
	t.Parallel()
	console, receiver := startConsoleWithReceiver(t)
	pool := console.pool
	ctx := context.Background()
	expect := newExpect()
	long := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30000)}

	// The engineer keeps the dead-letter page open: nothing is dead yet.
	page := signedIn(t, console, "operator", "/dead-letters")
	require.NoError(t, page.SetViewportSize(1400, 900))
	openLive(t, page, "/dead-letters", deadLettersLiveFetch)
	group := page.GetByTestId("dead-letter-group")
	require.NoError(t, expect.Locator(group).ToHaveCount(0))

	// The outage: three messages without an aggregate and two aggregates of
	// two, whose heads die and block the messages behind them.
	enqueue(t, pool, "hook", 3)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
		SELECT 'order.paid', 'hook', 'order', 'o-' || (g % 2), jsonb_build_object('order', g) FROM generate_series(1, 4) g ORDER BY g`)
	require.NoError(t, err)
	// An inbound event that failed during the outage, for the inbox.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status, attempts, last_error)
		VALUES ('stripe', 'evt_outage', '{"a": 1}', 'failed', 3, 'handler: the billing service timed out')`)
	require.NoError(t, err)

	// The dead letters arrive on the open page, without a reload: one
	// group, whose count grows to the database's.
	require.NoError(t, expect.Locator(group.GetByTestId("group-dead")).ToHaveText("5", long))
	require.NoError(t, expect.Locator(group).ToHaveCount(1))
	requireNotReloaded(t, page)
	var fingerprint string
	require.NoError(t, pool.QueryRow(ctx, `SELECT min(error_fingerprint) FROM switchyard.outbox WHERE state = 'dead'`).Scan(&fingerprint))
	require.Equal(t, 1, count(t, pool, `SELECT count(DISTINCT error_fingerprint) FROM switchyard.outbox WHERE state = 'dead'`), "one group")
	require.NoError(t, expect.Locator(group).ToHaveId("group-"+fingerprint))
	require.Equal(t, "5", number(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND error_fingerprint = $1`, fingerprint))
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`), "written with the heads' death")
	atWidths(t, page, "dead-letters")

	// The dashboard says so and leads to the group.
	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead-value")).ToHaveText("5", long))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead")).ToContainText(deadGroups(t, pool)))
	require.NoError(t, expect.Locator(page.GetByTestId("dash-status-level")).Not().ToHaveText("Healthy"))
	atWidths(t, page, "dashboard")
	require.NoError(t, page.GetByTestId("stat-dead").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/dead-letters$`)))
	require.NoError(t, expect.Locator(group.GetByTestId("group-dead")).ToHaveText("5"))
	require.NoError(t, group.GetByTestId("group-link").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/dead-letters/`+regexp.QuoteMeta(url.PathEscape(fingerprint))+`$`)))
	require.NoError(t, expect.Locator(page.GetByTestId("message-row")).ToHaveCount(5))
	atWidths(t, page, "group")

	// Read one message: its payload, its refused attempt, its error.
	var first int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT min(id) FROM switchyard.outbox WHERE aggregate_id = 'o-1'`).Scan(&first))
	require.NoError(t, page.GetByTestId("message-row").Locator(fmt.Sprintf(`a[href="/messages/%d"]`, first)).Click())
	require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText(fmt.Sprintf("Message %d", first)))
	require.NoError(t, expect.Locator(page.GetByTestId("payload")).ToContainText(`"order": 1`))
	require.NoError(t, expect.Locator(page.GetByTestId("attempts").GetByTestId("attempt-row")).ToHaveCount(
		count(t, pool, `SELECT count(*) FROM switchyard.outbox_attempt_log WHERE message_id = $1`, first)))
	require.NoError(t, expect.Locator(page.GetByTestId("attempts")).ToContainText("422"))
	atWidths(t, page, "message")

	// Fix the destination, replay this message and follow it.
	receiver.healed.Store(true)
	require.NoError(t, page.GetByTestId("message-actions-link").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("replay-submit")).ToBeVisible())
	require.NoError(t, page.GetByTestId("replay-submit").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("action-notice")).ToContainText("Replayed (redeliver)"))
	require.NoError(t, expect.Locator(page.GetByTestId("actions-status")).ToContainText("the latest replay is delivered",
		playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(30000)}))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1 AND state = 'delivered'`, first))
	atWidths(t, page, "replayed-one")

	// The rest of the group as one bulk job, at 800 px this time.
	require.NoError(t, page.SetViewportSize(800, 900))
	_, err = page.Goto("/dead-letters/" + url.PathEscape(fingerprint))
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("bulk-replay-link").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-fingerprint")).ToHaveValue(fingerprint))
	require.NoError(t, page.GetByTestId("bulk-estimate").Click())
	still := number(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND replays = 0`)
	require.Equal(t, "4", still)
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-estimate-count")).ToHaveText(still+" dead messages match."))
	require.NoError(t, page.GetByTestId("bulk-start").Click())
	job := page.GetByTestId("replay-job")
	require.NoError(t, expect.Locator(job.GetByTestId("job-delivered")).ToHaveText(still+" delivered", long))
	require.NoError(t, expect.Locator(job.GetByTestId("job-pending")).ToHaveText("0 pending"))
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_job IS NOT NULL AND state = 'delivered'`))
	atWidths(t, page, "job-settled")

	// Nothing is dead any more; the list, by a topic prefix, shows every
	// original replayed and delivered, and counts them exactly.
	testwait.Until(t, time.Minute, "the blocked messages delivered", func() bool {
		return count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'pending'`) == 0
	})
	_, err = page.Goto("/messages?state=dead")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("message-row")).ToHaveCount(0))
	_, err = page.Goto("/messages?state=replayed&topic=order.*")
	require.NoError(t, err)
	replayed := number(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND replays > 0 AND topic LIKE 'order.%'`)
	require.Equal(t, "5", replayed)
	require.NoError(t, expect.Locator(page.GetByTestId("messages-total")).ToHaveText(replayed+" messages"))
	require.NoError(t, expect.Locator(page.GetByTestId("replay-outcome")).ToHaveText([]string{"→ delivered", "→ delivered", "→ delivered", "→ delivered", "→ delivered"}))
	atWidths(t, page, "messages-replayed")

	// The inbox: the failed inbound event, as the database has it.
	_, err = page.Goto("/inbox?status=failed")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("inbox-event-row")).ToHaveCount(
		count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE status = 'failed'`)))
	require.NoError(t, expect.Locator(page.GetByTestId("inbox-event-row")).ToContainText("evt_outage"))
	atWidths(t, page, "inbox")

	// The audit (an admin's page): the replay and the bulk job, by the
	// operator.
	admin := signedIn(t, console, "admin", "/audit")
	require.NoError(t, admin.SetViewportSize(1400, 900))
	rows := admin.GetByTestId("audit-row")
	for _, action := range []string{"message.replay", "replay_job.start"} {
		n := count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = $1 AND actor = 'operator'`, action)
		require.Equal(t, 1, n, action)
		require.NoError(t, expect.Locator(rows.Filter(playwright.LocatorFilterOptions{HasText: action})).ToHaveCount(n), action)
	}
	replayRow := rows.Filter(playwright.LocatorFilterOptions{HasText: "message.replay"})
	require.NoError(t, expect.Locator(replayRow.GetByTestId("audit-target")).ToHaveAttribute("href", fmt.Sprintf("/messages/%d", first)))
	require.NoError(t, expect.Locator(rows.Filter(playwright.LocatorFilterOptions{HasText: "replay_job.start"}).GetByTestId("audit-filter")).ToContainText(fingerprint))
	atWidths(t, admin, "audit")

	// The blocked aggregates flow again.
	_, err = page.Goto("/aggregates/blocked")
	require.NoError(t, err)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`))
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-row")).ToHaveCount(0))
	atWidths(t, page, "blocked")

	// And the dashboard agrees: no dead letters.
	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead-value")).ToHaveText("0", long))
	require.NoError(t, expect.Locator(page.GetByTestId("stat-dead")).ToContainText(deadGroups(t, pool)))
	atWidths(t, page, "dashboard-after")
}
