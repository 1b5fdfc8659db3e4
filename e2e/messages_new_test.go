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
)

// A message list left open learns of new messages that are only enqueued
// (enqueues are not on the change feed): the statistics stream's events
// carry the newest outbox id, and the "N new" control counts the matching
// ones without a reload and without moving the list; the link shows them.
// Messages that do not match the filters are not counted.
func TestNewMessagesControlCountsEnqueuesLive(t *testing.T) {
	t.Parallel()
	f := startPagesFixture(t)
	page := newPage(t, f.console.URL)
	expect := newExpect()
	ctx := context.Background()
	var asks atomic.Int64
	page.OnRequest(func(r playwright.Request) {
		if strings.Contains(r.URL(), "/messages/new?") {
			asks.Add(1)
		}
	})

	// billing: ids 3, 6, ..., 60 of the fixture. The control asks once
	// when the stream is ready; after that, only a stats event can make
	// it ask.
	_, err := page.ExpectResponse(regexp.MustCompile(`/messages/new\?.*above=60`), func() error {
		_, err := page.Goto("/messages?destination=billing")
		return err
	})
	require.NoError(t, err)
	rows := page.GetByTestId("message-row")
	firstID := rows.First().Locator("td").First()
	require.NoError(t, expect.Locator(firstID).ToHaveText("60"))
	require.NoError(t, expect.Locator(rows).ToHaveCount(20))
	_, err = page.Evaluate(`() => { window.notReloaded = true }`)
	require.NoError(t, err)

	// Three for billing among four for shop, each in a transaction of its
	// own, as services enqueue.
	enqueued := time.Now()
	for _, dest := range []string{"shop", "billing", "shop", "billing", "shop", "shop", "billing"} {
		_, err := f.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.created', $1, '{}')`, dest)
		require.NoError(t, err)
	}
	newLink := page.GetByTestId("new-messages-link")
	// What bounds the wait: the statistics leader's tick (every 500 ms, or
	// four times its duration when the database is slow, as under the
	// whole parallel suite), the stream, and the control's one ask a
	// second. About 1 s on a quiet machine; 2 s was too tight in CI.
	require.NoError(t, expect.Locator(newLink).ToHaveText("3 new messages: show"),
		"the control did not count the enqueued messages within 5 s")
	t.Logf("counted %s after the enqueues", time.Since(enqueued).Round(time.Millisecond))
	require.NoError(t, expect.Locator(firstID).ToHaveText("60"), "the list moved before the control was clicked")
	require.NoError(t, expect.Locator(rows).ToHaveCount(20))
	still, err := page.Evaluate(`() => window.notReloaded === true`)
	require.NoError(t, err)
	require.Equal(t, true, still, "the page was reloaded")
	screenshot(t, page, "messages-new")
	answerKeepsLink(t, page, f.pool, newLink)

	above68 := regexp.MustCompile(`/messages/new\?.*above=68`)
	_, err = page.ExpectResponse(above68, func() error { return newLink.Click() })
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(f.console.URL+"/messages?destination=billing"))
	require.NoError(t, expect.Locator(rows).ToHaveCount(23))
	require.NoError(t, expect.Locator(firstID).ToHaveText("68"))

	// Only a message for shop now: the control asks (the newest id moved
	// above the first row) and shows nothing.
	_, err = page.ExpectResponse(above68, func() error {
		_, err := f.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.created', 'shop', '{}')`)
		return err
	})
	require.NoError(t, err)
	require.NoError(t, expect.Locator(newLink).ToHaveCount(0))
	require.NoError(t, expect.Locator(firstID).ToHaveText("68"))
	t.Logf("the control asked %d times", asks.Load())
	require.LessOrEqual(t, asks.Load(), int64(8), "the control asks only when the newest id moves, at most once a second")

	// At the cap ("100+ new") the count cannot grow until the reader
	// follows the link: stats events no longer make the control ask.
	_, err = page.Evaluate(`() => {
		window.statsSeen = 0;
		document.body.addEventListener("htmx:confirm", (e) => {
			const t = e.detail.triggeringEvent;
			if (t && t.type === "sse:stats") window.statsSeen++;
		});
	}`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 'order.created', 'billing', '{}' FROM generate_series(1, 101)`)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(newLink).ToHaveText(regexp.MustCompile(`^100\+ new messages: show$`)))
	capped := asks.Load()
	// Three more messages, each awaited as a stats event of its own (the
	// statistics change only when something happened, and each enqueue
	// moves the newest id): over a second of events that would each have
	// made an uncapped control ask.
	for i := range 3 {
		seen, err := page.Evaluate(`() => window.statsSeen`)
		require.NoError(t, err)
		_, err = f.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.created', 'billing', '{}')`)
		require.NoError(t, err)
		_, err = page.WaitForFunction(`(seen) => window.statsSeen > seen`, seen)
		require.NoError(t, err, "a stats event after enqueue %d past the cap", i+1)
	}
	require.Equal(t, capped, asks.Load(), "the control asked again after reaching the cap")
	screenshot(t, page, "messages-new-capped")
}

// answerKeepsLink expects the "N new" control to merge an answer into the
// link already there, never to replace it: with enqueues every second it
// is refreshed every second, and a click must not land on a link just
// detached. A message for shop (filtered out) moves the newest id, so the
// control asks once more and gets the same answer.
func answerKeepsLink(t *testing.T, page playwright.Page, pool *pgxpool.Pool, newLink playwright.Locator) {
	t.Helper()
	handle, err := newLink.EvaluateHandle("e => e", nil)
	require.NoError(t, err)
	_, err = page.Evaluate(`() => {
		window.newSettled = 0;
		document.body.addEventListener("htmx:afterSettle", (e) => {
			if (e.target.dataset.testid === "new-messages") window.newSettled++;
		});
	}`)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.created', 'shop', '{}')`)
	require.NoError(t, err)
	_, err = page.WaitForFunction(`() => window.newSettled > 0`, nil)
	require.NoError(t, err, "the control did not ask after the newest id moved")
	connected, err := handle.Evaluate("e => e.isConnected")
	require.NoError(t, err)
	require.Equal(t, true, connected, "the control's answer replaced its link")
	require.NoError(t, newExpect().Locator(newLink).ToHaveText("3 new messages: show"))
}
