package e2e

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// Issue 14, item 4: the message list filtered by a topic prefix and a
// from/to window sends that filter to bulk replay ("Replay the dead
// messages of this filter"), whose form opens filled in and estimates the
// messages the list shows; the job replays exactly those, none of the
// messages just outside a bound.
func TestListFilterReplaysExactlyTheListedMessages(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	ctx := context.Background()
	deadMessages(t, console.pool, 1, `{}`) // the destination and the group
	from := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for i, m := range []struct {
		topic, state string
		at           time.Duration
	}{
		{"orders.created", "dead", 0}, {"orders.paid", "dead", 59 * time.Minute},
		{"orders.created", "dead", -time.Microsecond}, {"orders.created", "dead", time.Hour}, // just outside the window
		{"orders", "dead", time.Minute}, {"ordersx.created", "dead", time.Minute}, // just outside the prefix
		{"orders.created", "delivered", time.Minute},
	} {
		_, err := console.pool.Exec(ctx, `INSERT INTO switchyard.outbox
			(topic, destination, payload, state, attempts, last_error, error_fingerprint, created_at, finished_at)
			VALUES ($1, 'billing', $2, $3, 3, 'HTTP 422: rejected', 'fp-422', $4, $4)`,
			m.topic, `{"n":`+strconv.Itoa(i)+`}`, m.state, from.Add(m.at))
		require.NoError(t, err)
	}
	rows, err := console.pool.Query(ctx, `SELECT id FROM switchyard.outbox WHERE state = 'dead' AND topic LIKE 'orders.%'
		AND created_at >= $1 AND created_at < $2 ORDER BY id`, from, from.Add(time.Hour))
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, want, 2)

	page := signedIn(t, console, "operator", "/messages")
	expect := newExpect()
	_, err = page.GetByTestId("filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"dead"}})
	require.NoError(t, err)
	require.NoError(t, page.GetByTestId("filter-topic").Fill("orders."))
	require.NoError(t, page.GetByTestId("filter-from").Fill("2026-11-30T14:00"))
	require.NoError(t, page.GetByTestId("filter-to").Fill("2026-11-30T15:00"))
	require.NoError(t, page.GetByTestId("filter-apply").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("message-row")).ToHaveCount(len(want)))
	shown, err := page.Locator(`[data-testid="message-row"] td.num a`).AllTextContents()
	require.NoError(t, err)
	listed := make([]int64, len(shown))
	for i, s := range shown {
		listed[i], err = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		require.NoError(t, err)
	}
	slices.Sort(listed)
	require.Equal(t, want, listed, "the list shows the messages inside every bound")

	require.NoError(t, page.GetByTestId("messages-bulk-replay").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-topic")).ToHaveValue("orders."))
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-created_from")).ToHaveValue("2026-11-30T14:00"))
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-created_to")).ToHaveValue("2026-11-30T15:00"))
	require.NoError(t, page.GetByTestId("bulk-estimate").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-estimate-count")).ToHaveText("2 dead messages match."))
	screenshot(t, page, "replays-from-list-filter")

	require.NoError(t, page.GetByTestId("bulk-start").Click())
	job := page.GetByTestId("replay-job")
	require.NoError(t, expect.Locator(job).ToHaveCount(1))
	require.NoError(t, expect.Locator(job.GetByTestId("job-state")).ToHaveText("done"))
	rows, err = console.pool.Query(ctx, `SELECT replay_of FROM switchyard.outbox WHERE replay_job IS NOT NULL ORDER BY replay_of`)
	require.NoError(t, err)
	replayed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, want, replayed, "the job replayed exactly the listed messages")

	// A filter no job can take says why, where the link would be.
	_, err = page.Goto("/messages?state=delivered&topic=orders.")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("messages-bulk-replay-unavailable")).ToContainText("dead messages only"))
	require.NoError(t, expect.Locator(page.GetByTestId("messages-bulk-replay")).ToHaveCount(0))
}
