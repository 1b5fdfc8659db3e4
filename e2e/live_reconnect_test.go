package e2e

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

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

// TestLivePagesConvergeAfterTheStreamIsCut cuts the browsers' live streams
// for real: the console process is stopped (its SSE streams and its LISTEN
// connection end with it), messages are enqueued while it is down, and a
// new console is started on the same address. The dashboard and the
// message list, never reloaded, reconnect their streams and show what
// happened meanwhile, although no change happens after they reconnect:
// the refresh on the stream's ready event is what converges them.
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
	expect := playwright.NewPlaywrightAssertions()

	var streams atomic.Int64
	dash := outagePage(t, first.URL)
	dash.OnRequest(func(r playwright.Request) {
		if strings.Contains(r.URL(), "/events?") {
			streams.Add(1)
		}
	})
	_, err = dash.Goto("/")
	require.NoError(t, err)
	pending := dash.GetByTestId("stat-pending-value")
	require.NoError(t, expect.Locator(pending).ToHaveText("2", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(15000)}))
	msgs := outagePage(t, first.URL)
	_, err = msgs.ExpectResponse(regexp.MustCompile(`/messages/new\?above=2$`), func() error {
		_, err := msgs.Goto("/messages")
		return err
	})
	require.NoError(t, err)
	for _, p := range []playwright.Page{dash, msgs} {
		_, err = p.Evaluate(`() => {
			window.e2eNoReload = true;
			window.e2eStreamErrors = 0;
			document.body.addEventListener("htmx:sseError", () => { window.e2eStreamErrors++; });
		}`)
		require.NoError(t, err)
	}
	opened := streams.Load()

	first.Stop(t)
	for _, p := range []playwright.Page{dash, msgs} {
		_, err = p.WaitForFunction(`() => window.e2eStreamErrors > 0`, nil)
		require.NoError(t, err, "the page did not see its stream end")
	}
	enqueue(t, pool, "e2e-hook", 3)

	// The pages converge through the refresh that the reconnected
	// stream's ready event asks for (fresh=1), not through a later change.
	var second *consoletest.Process
	_, err = dash.ExpectResponse(regexp.MustCompile(`/dashboard/live\?.*fresh=1`), func() error {
		second = serve()
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, expect.Locator(pending).ToHaveText("5", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(5000)}),
		"the dashboard did not converge after its stream was cut")
	require.Greater(t, streams.Load(), opened, "the dashboard opened a new stream")
	require.NoError(t, expect.Locator(msgs.GetByTestId("new-messages-link")).ToHaveText("3 new messages: show", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(5000)}),
		"the message list did not converge after its stream was cut")
	require.NoError(t, expect.Locator(msgs.GetByTestId("message-row").First().Locator("td").First()).ToHaveText("2"))
	for _, p := range []playwright.Page{dash, msgs} {
		kept, err := p.Evaluate(`() => window.e2eNoReload === true`)
		require.NoError(t, err)
		require.Equal(t, true, kept, "the page reloaded")
	}
	screenshot(t, dash, "dashboard-reconnected")
	screenshot(t, msgs, "messages-reconnected")
	second.Stop(t)
}
