package e2e

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// outagePage opens a page whose browser log may hold the network errors of
// a console that is down for a while: refused connections, htmx logging
// the stream's error event (htmx:sseError, as "[object Event]") and a
// request it could not send.
// Anything else it reports still fails the test.
func outagePage(t *testing.T, baseURL string) playwright.Page {
	t.Helper()
	return newPageTolerating(t, baseURL, func(p string) bool {
		fromHTMX := strings.Contains(p, "/static/vendor/htmx.min.")
		htmxStreamError := strings.HasPrefix(p, "console error: [object Event] (") && fromHTMX
		// A region's request sent while the console is down (the "N new"
		// check's deferred ask, say): htmx logs the failed send.
		htmxSendError := (strings.HasPrefix(p, "console error: htmx:sendError,") || strings.HasPrefix(p, "console error: htmx:afterRequest,")) && fromHTMX
		return htmxStreamError || htmxSendError || strings.Contains(p, "net::ERR_CONNECTION_REFUSED") || strings.Contains(p, "net::ERR_EMPTY_RESPONSE") ||
			strings.Contains(p, "net::ERR_CONNECTION_RESET") || strings.Contains(p, "net::ERR_INCOMPLETE_CHUNKED_ENCODING")
	})
}

// livePage is one live page of the console, and how to see that it
// converged after its stream was cut.
type livePage struct {
	name, path string
	// converged waits until the page shows what changed while the
	// console was down (outage), without a reload.
	converged func(p playwright.Page) error
	page      playwright.Page
}

// TestLivePagesConvergeAfterTheStreamIsCut cuts the browsers' live streams
// for real: the console process is stopped (its SSE streams and its LISTEN
// connection end with it), every live page's data changes while it is
// down (messages enqueued, one goes dead, a bulk replay job and an audit
// entry recorded), and a new console is started on the same address.
// Every live page, never reloaded, reconnects its stream and shows what
// happened meanwhile, although no change happens after they reconnect:
// the refresh on the stream's ready event is what converges them
// (LiveRegion; invariant 8).
func TestLivePagesConvergeAfterTheStreamIsCut(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addr := consoletest.FreeAddr(t)
	serve := func() *consoletest.Process {
		// No dispatcher: pending counts stay as enqueued.
		p := consoletest.Start(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"}, "--listen", addr, "--workers", "0")
		p.Addr, p.URL = addr, "http://"+addr
		p.WaitReady(t, time.Minute)
		return p
	}
	first := serve()
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('e2e-hook', 'webhook', 'http://127.0.0.1:9/')`)
	require.NoError(t, err)
	enqueue(t, pool, "e2e-hook", 2)
	expect := newExpect()
	// Nothing changes after the consoles restart and no page but the
	// dashboard polls (its fresh=1 read is checked apart), so the
	// assertions' bounds (expectTimeout) only say how slow a loaded machine
	// may be, not what converged the pages.

	var streams atomic.Int64
	// The dashboard's reads of its region, with when they were sent: if
	// the fresh read never comes, the failure says what came instead.
	var readsMu sync.Mutex
	var reads []string
	dash := outagePage(t, first.URL)
	dash.OnRequest(func(r playwright.Request) {
		switch u := r.URL(); {
		case strings.Contains(u, "/events?"):
			streams.Add(1)
		case strings.Contains(u, "/dashboard/live"):
			readsMu.Lock()
			reads = append(reads, time.Now().Format("15:04:05.000")+" "+u)
			readsMu.Unlock()
		}
	})
	_, err = dash.Goto("/")
	require.NoError(t, err)
	pending := dash.GetByTestId("stat-pending-value")
	require.NoError(t, expect.Locator(pending).ToHaveText("2"))
	msgs := outagePage(t, first.URL)
	_, err = msgs.ExpectResponse(regexp.MustCompile(`/messages/new\?above=2$`), func() error {
		_, err := msgs.Goto("/messages")
		return err
	})
	require.NoError(t, err)
	others := []*livePage{
		{name: "dead letters", path: "/dead-letters", converged: func(p playwright.Page) error {
			return expect.Locator(p.GetByTestId("dead-letter-group")).ToHaveCount(1)
		}},
		{name: "message", path: "/messages/1", converged: func(p playwright.Page) error {
			return expect.Locator(p.GetByTestId("message-actions-link")).ToHaveCount(1)
		}},
		{name: "message actions", path: "/messages/1/actions", converged: func(p playwright.Page) error {
			return expect.Locator(p.GetByTestId("message-state")).ToHaveText("dead")
		}},
		{name: "replays", path: "/replays", converged: func(p playwright.Page) error {
			return expect.Locator(p.GetByTestId("replay-job")).ToHaveCount(1)
		}},
		{name: "audit", path: "/audit", converged: func(p playwright.Page) error {
			return expect.Locator(p.GetByTestId("audit-row").Filter(playwright.LocatorFilterOptions{HasText: "e2e.outage"})).ToHaveCount(1)
		}},
	}
	pages := []playwright.Page{dash, msgs}
	for _, lp := range others {
		lp.page = outagePage(t, first.URL)
		_, err := lp.page.Goto(lp.path)
		require.NoError(t, err, lp.name)
		pages = append(pages, lp.page)
	}
	for _, p := range pages {
		_, err = p.Evaluate(`() => {
			window.e2eNoReload = true;
			window.e2eStreamErrors = 0;
			document.body.addEventListener("htmx:sseError", () => { window.e2eStreamErrors++; });
		}`)
		require.NoError(t, err)
	}
	opened := streams.Load()

	first.Stop(t)
	for _, p := range pages {
		_, err = p.WaitForFunction(`() => window.e2eStreamErrors > 0`, nil, playwright.PageWaitForFunctionOptions{Timeout: playwright.Float(30000)})
		require.NoError(t, err, "the page did not see its stream end: %s", p.URL())
	}
	changeEveryLivePage(t, pool)

	// The pages converge through the refresh that the reconnected
	// stream's ready event asks for (fresh=1), not through a later change.
	// The dashboard's answer is awaited from the moment the new console
	// is ready, so a slow start on a loaded machine does not count
	// against it.
	freshRead := regexp.MustCompile(`/dashboard/live\?.*fresh=1`)
	freshAnswered := make(chan struct{})
	var once sync.Once
	dash.OnResponse(func(r playwright.Response) {
		if freshRead.MatchString(r.URL()) {
			once.Do(func() { close(freshAnswered) })
		}
	})
	second := serve()
	select {
	case <-freshAnswered:
	case <-time.After(30 * time.Second):
		readsMu.Lock()
		defer readsMu.Unlock()
		t.Fatalf("the dashboard asked for no fresh read within 30 s of the new console being ready (streams opened: %d before the cut, %d now); its reads of the region:\n%s",
			opened, streams.Load(), strings.Join(reads, "\n"))
	}
	require.NoError(t, expect.Locator(pending).ToHaveText("4"),
		"the dashboard did not converge after its stream was cut")
	require.Greater(t, streams.Load(), opened, "the dashboard opened a new stream")
	require.NoError(t, expect.Locator(msgs.GetByTestId("new-messages-link")).ToHaveText("3 new messages: show"),
		"the message list did not converge after its stream was cut")
	require.NoError(t, expect.Locator(msgs.GetByTestId("message-row").First().Locator("td").First()).ToHaveText("2"))
	for _, lp := range others {
		require.NoError(t, lp.converged(lp.page), "the %s page did not converge after its stream was cut", lp.name)
	}
	for _, p := range pages {
		kept, err := p.Evaluate(`() => window.e2eNoReload === true`)
		require.NoError(t, err)
		require.Equal(t, true, kept, "the page reloaded: %s", p.URL())
	}
	screenshot(t, dash, "dashboard-reconnected")
	screenshot(t, msgs, "messages-reconnected")
	for _, lp := range others {
		screenshot(t, lp.page, strings.ReplaceAll(lp.name, " ", "-")+"-reconnected")
	}
	second.Stop(t)
}

// changeEveryLivePage changes what every live page shows, while no
// console runs: three more messages, message 1 dead in a dead-letter
// group, a finished bulk replay job and an audit entry.
func changeEveryLivePage(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	enqueue(t, pool, "e2e-hook", 3)
	_, err := pool.Exec(ctx, `
		UPDATE switchyard.outbox SET state = 'dead', last_error = 'e2e: refused', error_fingerprint = 'e2e-refused' WHERE id = 1;
		INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, destinations)
		VALUES ('e2e-refused', 1, now(), now(), 1, '{e2e-hook}');
		INSERT INTO switchyard.replay_jobs (filter, filter_key, mode, actor, rate_per_sec, upper_id, state, finished_at)
		VALUES ('{}', 'e2e', 'redeliver', 'e2e', 10, 5, 'done', now())`)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := audit.Record(ctx, tx, audit.Entry{Actor: "e2e", Action: "e2e.outage", Outcome: audit.OK})
		return err
	}))
}
