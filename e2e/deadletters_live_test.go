package e2e

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// A dead letter made by the console's own dispatcher (not written by the
// test) appears on the open dead-letter page as a new group, without a
// reload: the finalize's change-feed row, the LISTEN wake-up and the
// stream carry it.
func TestDeadLetterFromTheDispatcherAppearsLive(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// One attempt allowed, to a webhook the dispatcher cannot sign for (no
	// secret): the first attempt fails, and is final.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, retry_base_ms, retry_cap_ms, max_attempts)
		VALUES ('refusing', 'webhook', 'http://127.0.0.1:9/', 100, 200, 1)`)
	require.NoError(t, err)
	console := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"})
	t.Cleanup(func() { console.Stop(t) })
	page := newPage(t, console.URL)
	expect := newExpect()

	_, err = page.ExpectResponse(regexp.MustCompile(`/dead-letters/groups$`), func() error {
		_, err := page.Goto("/dead-letters")
		return err
	})
	require.NoError(t, err)
	groups := page.GetByTestId("dead-letter-group")
	require.NoError(t, expect.Locator(groups).ToHaveCount(0))
	_, err = page.Evaluate(`() => { window.notReloaded = true }`)
	require.NoError(t, err)

	enqueue(t, pool, "refusing", 2)
	require.NoError(t, expect.Locator(groups).ToHaveCount(1),
		"the dispatcher's dead letters did not appear as a group")
	require.NoError(t, expect.Locator(groups.First().GetByTestId("group-dead")).ToHaveText("2"))
	still, err := page.Evaluate(`() => window.notReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, still, "the page was reloaded")
	screenshot(t, page, "dead-letters-live")
}
