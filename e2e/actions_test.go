package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// startConsoleForActions is startConsoleWithAccounts without dispatcher
// workers, so that a replay stays in flight (pending) while the test looks
// at it.
func startConsoleForActions(t *testing.T) withAccounts {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_WORKERS=0"})
	t.Cleanup(func() { p.Stop(t) })
	svc := e2eAuth(pool, auth.Config{Notify: func() { _ = changefeed.Notify(context.Background(), pool) }})
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		require.NoError(t, svc.AddUser(context.Background(), auth.CLI, r.String(), r, e2ePassword))
	}
	return withAccounts{Process: p, svc: svc, pool: pool}
}

// deadMessages writes n dead messages of one dead-letter group (as a
// dispatcher leaves them) and returns their ids.
func deadMessages(t *testing.T, pool *pgxpool.Pool, n int, payload string) []int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address)
		VALUES ('billing', 'function', 'billing') ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `INSERT INTO switchyard.outbox
		(topic, destination, payload, state, attempts, last_error, error_fingerprint, finished_at)
		SELECT 'orders.created', 'billing', $1, 'dead', 3, 'HTTP 422: rejected', 'fp-422', now()
		FROM generate_series(1, $2) RETURNING id`, payload, n)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id)
		VALUES ('fp-422', $1, now(), now(), $2) ON CONFLICT (fingerprint) DO UPDATE SET dead = dead_letter_groups.dead + $1`, n, ids[len(ids)-1])
	require.NoError(t, err)
	return ids
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// signedIn is signedInAs for the account named after its role.
func signedIn(t *testing.T, console withAccounts, role, path string) playwright.Page {
	t.Helper()
	return signedInAs(t, console, role, path)
}

// An operator double-clicks Replay: one replay, one audit row; a second
// operator's page of the same message follows live; re-apply without a
// reason is refused.
func TestOperatorsReplayADeadMessageOnce(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	id := deadMessages(t, console.pool, 1, `{"order":7}`)[0]
	path := fmt.Sprintf("/messages/%d/actions", id)
	expect := newExpect()

	first := signedIn(t, console, "operator", path)
	second := signedIn(t, console, "admin", path)
	require.NoError(t, expect.Locator(first.GetByTestId("replay-submit")).ToBeVisible())
	screenshot(t, first, "actions-panel")

	// Re-apply without a reason: refused, nothing created.
	require.NoError(t, first.GetByTestId("mode-reapply").Check())
	require.NoError(t, first.GetByTestId("replay-submit").Click())
	require.NoError(t, expect.Locator(first.GetByTestId("action-error")).ToContainText("needs a reason"))
	require.Zero(t, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, id))
	require.NoError(t, expect.Locator(first.GetByTestId("mode-reapply")).ToBeChecked(), "the form keeps the operator's choice")
	screenshot(t, first, "actions-refused")
	require.NoError(t, first.GetByTestId("mode-redeliver").Check())

	require.NoError(t, first.GetByTestId("replay-submit").Dblclick())
	require.NoError(t, expect.Locator(first.GetByTestId("action-notice")).ToContainText("Replayed (redeliver) as message"))
	require.NoError(t, expect.Locator(first.GetByTestId("actions-status")).ToContainText("in flight"))
	require.NoError(t, expect.Locator(first.GetByTestId("replay-submit")).ToHaveCount(0))
	screenshot(t, first, "actions-replayed")

	// The second operator's page follows without a reload: no Replay any
	// more, the replay in flight instead (TestTwoOperatorsClickReplayAtOnce
	// has both click at once).
	require.NoError(t, expect.Locator(second.GetByTestId("last-replay")).ToBeVisible())
	require.NoError(t, expect.Locator(second.GetByTestId("replay-submit")).ToHaveCount(0))

	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, id))
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'message.replay'`))
}

func TestViewerSeesNoActionControls(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	id := deadMessages(t, console.pool, 1, `{"order":8}`)[0]
	page := signedIn(t, console, "viewer", fmt.Sprintf("/messages/%d/actions", id))
	expect := newExpect()
	require.NoError(t, expect.Locator(page.GetByTestId("no-actions")).ToBeVisible())
	for _, control := range []string{"replay-submit", "discard-submit", "edit-replay"} {
		require.NoError(t, expect.Locator(page.GetByTestId(control)).ToHaveCount(0), control)
	}
	require.NoError(t, expect.Locator(page.GetByTestId("message-payload")).ToContainText("payload hidden"))
	screenshot(t, page, "actions-viewer")
}

// Edit and replay shows the diff before anything is created; confirming
// replays the edited payload and leaves the original as it was.
func TestEditShowsTheDiffBeforeReplaying(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	id := deadMessages(t, console.pool, 1, `{"order":9,"total":10}`)[0]
	page := signedIn(t, console, "admin", fmt.Sprintf("/messages/%d/actions", id))
	expect := newExpect()

	require.NoError(t, page.GetByTestId("edit-replay").Locator("summary").Click())
	require.NoError(t, page.GetByTestId("edit-payload").Fill("{\n  \"order\": 9,\n  \"total\": 12\n}"))
	require.NoError(t, page.GetByTestId("edit-reason").Fill("total was wrong"))
	require.NoError(t, page.GetByTestId("edit-preview-submit").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("diff-removed")).ToHaveText(`- "total": 10`))
	require.NoError(t, expect.Locator(page.GetByTestId("diff-added")).ToHaveText(`+ "total": 12`))
	require.Zero(t, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, id), "nothing before confirming")
	screenshot(t, page, "actions-edit-diff")

	require.NoError(t, page.GetByTestId("edit-confirm").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("action-notice")).ToContainText("Replayed with the edited payload (reapply)"))
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1 AND payload::jsonb = '{"order":9,"total":12}'::jsonb`, id))
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND payload::jsonb = '{"order":9,"total":10}'::jsonb`, id))
}

// A bulk replay: filter, estimate, confirm, live progress, cancel.
func TestBulkReplayShowsLiveProgressAndCancels(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	// Enough for a minute at 2/s: the cancel must come before the end,
	// however slow a loaded machine makes the steps before it.
	deadMessages(t, console.pool, 120, `{"bulk":true}`)
	page := signedIn(t, console, "operator", "/replays")
	expect := newExpect()
	require.NoError(t, expect.Locator(page.GetByTestId("empty-state")).ToBeVisible())
	screenshot(t, page, "replays-empty")

	require.NoError(t, page.GetByTestId("bulk-fingerprint").Fill("fp-422"))
	require.NoError(t, page.GetByTestId("bulk-rate").Fill("2"))
	require.NoError(t, page.GetByTestId("bulk-estimate").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-estimate-count")).ToHaveText("120 dead messages match."))
	screenshot(t, page, "replays-confirm")

	require.NoError(t, page.GetByTestId("bulk-start").Click())
	job := page.GetByTestId("replay-job")
	require.NoError(t, expect.Locator(job).ToHaveCount(1))
	require.NoError(t, expect.Locator(job.GetByTestId("job-state")).ToHaveText("running"))
	// Progress arrives over the live stream, without a reload.
	require.NoError(t, expect.Locator(job.GetByTestId("job-progress")).ToHaveText(regexp.MustCompile(`^[1-9]\d* replayed`)))
	screenshot(t, page, "replays-running")

	// Cancel asks first (hx-confirm): dismissed, nothing happens;
	// accepted, the job stops.
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
	require.NoError(t, job.GetByTestId("job-cancel").Click())
	require.NoError(t, expect.Locator(job.GetByTestId("job-state")).ToHaveText("running"))
	require.Contains(t, asked.Load(), "Cancel this bulk replay?")
	accept.Store(true)
	require.NoError(t, job.GetByTestId("job-cancel").Click())
	require.NoError(t, expect.Locator(job.GetByTestId("job-state")).ToHaveText("cancelled"))
	require.NoError(t, expect.Locator(job.GetByTestId("job-cancel")).ToHaveCount(0))
	screenshot(t, page, "replays-cancelled")
	replayed := count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`)
	require.Less(t, replayed, 120, "cancel stopped the job")
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'replay_job.start' AND detail->'filter'->>'fingerprint' = 'fp-422'`))
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'replay_job.cancel'`))
}

// openLive opens path signed in as name, and returns once the page's live
// stream is connected: its first live re-fetch (sent when the stream is
// ready) has been answered, so that any later change can only reach the
// page through the stream. The page is marked, so that a reload shows.
func openLive(t *testing.T, page playwright.Page, path string, liveFetch *regexp.Regexp) {
	t.Helper()
	_, err := page.ExpectResponse(liveFetch, func() error {
		_, err := page.Goto(path)
		return err
	})
	require.NoError(t, err, "the live region's first fetch of %s", path)
	_, err = page.Evaluate(`() => { window.e2eNotReloaded = true }`)
	require.NoError(t, err)
}

func requireNotReloaded(t *testing.T, page playwright.Page) {
	t.Helper()
	kept, err := page.Evaluate(`() => window.e2eNotReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, kept, "the page was reloaded")
}

// signedInAs is a new browser (its own context) signed in as name on
// path.
func signedInAs(t *testing.T, console withAccounts, name, path string) playwright.Page {
	t.Helper()
	page := newPage(t, console.URL)
	_, err := page.Goto(path)
	require.NoError(t, err)
	signIn(t, page, name, e2ePassword)
	require.NoError(t, newExpect().Page(page).ToHaveURL(console.URL+path))
	// The URL is there once the redirect commits, before the page has run
	// its deferred scripts: a click on an htmx button (type="button" with
	// hx-post) before htmx has processed the page sends nothing, as
	// TestBlockedAggregateUnblocksFromItsRow once found in CI. The load
	// event comes after DOMContentLoaded, where htmx processes the page.
	require.NoError(t, page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad}))
	return page
}

var actionsLiveFetch = regexp.MustCompile(`/messages/\d+/actions\?seen=`)

// requireLiveRefreshAfter makes the actions page's live region refresh now,
// as the change feed would after an action's answer, and waits for that
// refresh's answer. The version the page sends as seen is made stale
// first, so the refresh swaps its regions (a current one answers 204):
// the refresh that lands after the action's answer, deterministically.
func requireLiveRefreshAfter(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.ExpectResponse(actionsLiveFetch, func() error {
		_, err := page.Evaluate(`() => {
			document.getElementById("actions-seen").value = "stale";
			document.dispatchEvent(new Event("visibilitychange"));
		}`)
		return err
	})
	require.NoError(t, err, "the live refresh after the answer")
}

// Two operators, each in a browser of their own, click Replay on the same
// dead message at the same moment (both requests are held until both were
// sent): one replay is made, and both pages show the message as replayed,
// with the link to the replay, without a reload.
func TestTwoOperatorsClickReplayAtOnce(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	require.NoError(t, console.svc.AddUser(context.Background(), auth.CLI, "operator2", auth.Operator, e2ePassword))
	id := deadMessages(t, console.pool, 1, `{"order":21}`)[0]
	path := fmt.Sprintf("/messages/%d/actions", id)
	expect := newExpect()

	pages := []playwright.Page{signedInAs(t, console, "operator", path), signedInAs(t, console, "operator2", path)}
	arrived, release := make(chan struct{}, len(pages)), make(chan struct{})
	for _, page := range pages {
		openLive(t, page, path, actionsLiveFetch)
		require.NoError(t, page.Route("**/actions/replay", func(r playwright.Route) {
			arrived <- struct{}{}
			<-release
			_ = r.Continue() // fails only when the page is gone: the assertions below report it
		}))
	}
	for _, page := range pages {
		require.NoError(t, page.GetByTestId("replay-submit").Click())
	}
	for range pages {
		select {
		case <-arrived:
		case <-t.Context().Done():
			t.Fatal("a Replay request was never sent")
		}
	}
	close(release)

	for i, page := range pages {
		require.NoError(t, expect.Locator(page.GetByTestId("last-replay")).ToBeVisible(), "page %d", i)
		require.NoError(t, expect.Locator(page.GetByTestId("actions-status")).ToContainText("in flight"), "page %d", i)
		require.NoError(t, expect.Locator(page.GetByTestId("replay-submit")).ToHaveCount(0), "page %d", i)
	}
	var replay int64
	require.Equal(t, 1, count(t, console.pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, id))
	require.NoError(t, console.pool.QueryRow(context.Background(), `SELECT id FROM switchyard.outbox WHERE replay_of = $1`, id).Scan(&replay))
	for i, page := range pages {
		require.NoError(t, expect.Locator(page.GetByTestId("last-replay")).ToHaveAttribute("href", fmt.Sprintf("/messages/%d/actions", replay)), "page %d", i)
		requireNotReloaded(t, page)
	}
	// One of them was told it made the replay, the other that one was in
	// flight already.
	told := map[string]int{}
	for _, page := range pages {
		answer := page.GetByTestId("action-notice").Or(page.GetByTestId("action-error"))
		require.NoError(t, expect.Locator(answer).ToBeVisible())
		text, err := answer.TextContent()
		require.NoError(t, err)
		switch {
		case strings.HasPrefix(text, "Replayed (redeliver) as message "+strconv.FormatInt(replay, 10)):
			told["replayed"]++
		case strings.Contains(text, "still in flight"):
			told["in flight"]++
		default:
			t.Errorf("unexpected answer %q", text)
		}
	}
	require.Equal(t, map[string]int{"replayed": 1, "in flight": 1}, told)
	screenshot(t, pages[0], "actions-at-once-first")
	screenshot(t, pages[1], "actions-at-once-second")
}

// An operator replays a message while a viewer looks at it, on its
// actions page and on its message page: both of the viewer's pages show
// the replay within seconds, without a reload.
func TestReplayShowsLiveOnAnotherUsersPages(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	id := deadMessages(t, console.pool, 1, `{"order":22}`)[0]
	path := fmt.Sprintf("/messages/%d/actions", id)
	expect := newExpect()

	watcher := signedInAs(t, console, "viewer", path)
	openLive(t, watcher, path, actionsLiveFetch)
	detail, err := watcher.Context().NewPage()
	require.NoError(t, err)
	openLive(t, detail, fmt.Sprintf("/messages/%d", id), regexp.MustCompile(`/messages/\d+/live$`))
	require.NoError(t, expect.Locator(detail.GetByTestId("lineage")).ToContainText("never replayed"))
	require.NoError(t, expect.Locator(watcher.GetByTestId("last-replay")).ToHaveCount(0))

	actor := signedInAs(t, console, "operator", path)
	require.NoError(t, actor.GetByTestId("replay-submit").Click())
	// The actor's page shows the replay's link, in the answer and in the
	// region re-read by the live refresh that the same commit triggers,
	// and the answer's notice, which sits outside that region
	// (#action-outcome): whichever of the two lands last, the notice stays.
	require.NoError(t, expect.Locator(actor.GetByTestId("last-replay")).ToBeVisible(playwright.LocatorAssertionsToBeVisibleOptions{Timeout: playwright.Float(expectTimeout)}))
	var replay int64
	require.NoError(t, console.pool.QueryRow(context.Background(), `SELECT id FROM switchyard.outbox WHERE replay_of = $1`, id).Scan(&replay))
	notice := fmt.Sprintf("Replayed (redeliver) as message %d", replay)
	require.NoError(t, expect.Locator(actor.GetByTestId("action-notice")).ToContainText(notice))
	// The actor's own live refresh (the same commit's change) has landed
	// once the page asked for it after the answer; the notice survived it.
	requireLiveRefreshAfter(t, actor)
	require.NoError(t, expect.Locator(actor.GetByTestId("action-notice")).ToContainText(notice))

	// The change feed's path (commit, NOTIFY, the listener's read, the
	// stream, the page's fetch) takes well under a second alone; 5 s
	// leaves room for the whole parallel suite on 2 cores.
	soon := playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(expectTimeout)}
	require.NoError(t, expect.Locator(watcher.GetByTestId("last-replay")).ToHaveAttribute("href", fmt.Sprintf("/messages/%d/actions", replay), soon))
	require.NoError(t, expect.Locator(watcher.GetByTestId("actions-status")).ToContainText("in flight"))
	require.NoError(t, expect.Locator(detail.Locator(fmt.Sprintf(`[data-testid="lineage"] a[href="/messages/%d"]`, replay))).
		ToHaveCount(1))
	requireNotReloaded(t, watcher)
	requireNotReloaded(t, detail)
	screenshot(t, watcher, "actions-live-watcher")
	screenshot(t, detail, "message-live-lineage")
}

// A big job's progress climbs on the open page, batch after batch, over the
// live stream (the page is never reloaded), until it shows the job done.
func TestBigBulkReplayShowsProgressClimbingLive(t *testing.T) {
	t.Parallel()
	const messages = 6000
	console := startConsoleForActions(t)
	deadMessages(t, console.pool, messages, `{"bulk":true}`)
	page := signedIn(t, console, "operator", "/replays")
	expect := newExpect()
	_, err := page.Evaluate(`() => { window.notReloaded = true }`)
	require.NoError(t, err)

	require.NoError(t, page.GetByTestId("bulk-fingerprint").Fill("fp-422"))
	require.NoError(t, page.GetByTestId("bulk-rate").Fill("1000"))
	require.NoError(t, page.GetByTestId("bulk-estimate").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("bulk-estimate-count")).ToHaveText(fmt.Sprintf("%d,%03d dead messages match.", messages/1000, messages%1000)))
	require.NoError(t, page.GetByTestId("bulk-start").Click())
	job := page.GetByTestId("replay-job")
	require.NoError(t, expect.Locator(job).ToHaveCount(1))

	progress := regexp.MustCompile(`^(\d+) replayed, 0 skipped of \d+$`)
	var seen []int
	testwait.Until(t, time.Minute, "the job's progress to reach the end", func() bool {
		text, err := job.GetByTestId("job-progress").TextContent()
		require.NoError(t, err)
		m := progress.FindStringSubmatch(text)
		require.NotNil(t, m, "progress reads %q", text)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		if len(seen) == 0 || n != seen[len(seen)-1] {
			require.True(t, len(seen) == 0 || n > seen[len(seen)-1], "progress never goes back: %v then %d", seen, n)
			seen = append(seen, n)
			if n > 0 && n < messages && len(seen) == 3 {
				screenshot(t, page, "replays-big-running")
			}
		}
		return seen[len(seen)-1] >= messages
	})
	var between int
	for _, n := range seen {
		if n > 0 && n < messages {
			between++
		}
	}
	require.GreaterOrEqual(t, between, 3, "the page showed the job climbing: %v", seen)
	require.NoError(t, expect.Locator(job.GetByTestId("job-state")).ToHaveText("done"))
	notReloaded, err := page.Evaluate(`() => window.notReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, notReloaded, "the page was updated in place, not reloaded")
	screenshot(t, page, "replays-big-done")
	require.Equal(t, messages, count(t, console.pool, `SELECT count(DISTINCT replay_of) FROM switchyard.outbox WHERE replay_of IS NOT NULL`))
}
