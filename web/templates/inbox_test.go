package templates

import (
	"context"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

// renderInboxEvent renders an inbound event page's live region.
func renderInboxEvent(t *testing.T, e InboxEvent) *goquery.Document {
	t.Helper()
	var b strings.Builder
	require.NoError(t, InboxEventLive(e).Render(context.Background(), &b))
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
	require.NoError(t, err)
	return doc
}

// An event's "What it caused" lists the messages linked to it; without
// any, it says plainly why, for every status and kind of handler: which
// handlers record the messages they cause (forward, sql functions, Go
// handlers through switchyard.Enqueue) and what is not recorded (a Go
// handler's rows inserted with SQL).
func TestInboxEventSaysWhichHandlersRecordWhatTheyCaused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status, handler string
		want            []string // in the text, in order
		not             []string
	}{
		{status: "processed", handler: "sql", want: []string{"its sql function inserted none into switchyard.outbox",
			"or ran before a sql function's messages were linked here"}, not: []string{"Not recorded", "not linked"}},
		{status: "processed", handler: "forward", want: []string{"forwarded before forwarded messages were linked here", "Switchyard-Inbox-Event-Id"}},
		{status: "processed", handler: "customer-upsert", want: []string{"its handler (customer-upsert) enqueued none with switchyard.Enqueue",
			"inserts into the outbox with SQL are not linked"}},
		{status: "processed", handler: "", want: []string{"Forward sources, sql functions and Go handlers that enqueue with switchyard.Enqueue record",
			"rows a Go handler inserts into the outbox with SQL are not linked"}, not: []string{"sql handlers do not"}},
		{status: "failed", handler: "sql", want: []string{"Nothing yet: the handler's effect, and any message it enqueues, commit only when it succeeds."}, not: []string{"sql"}},
		{status: "parked", handler: "forward", want: []string{"Nothing yet"}},
		{status: "stale", handler: "forward", want: []string{"Nothing: a stale event's handler does not run."}},
		{status: "held", handler: "customer-upsert", want: []string{"Nothing yet: a held event's handler runs when its entity's previous version is applied."}},
	}
	for _, tc := range cases {
		doc := renderInboxEvent(t, InboxEvent{ID: "7", Status: tc.status, Handler: tc.handler})
		none := doc.Find("[data-testid=event-follow-through] [data-testid=event-messages-none]")
		require.Equal(t, 1, none.Length(), "%s/%s", tc.status, tc.handler)
		text := none.Text()
		at := 0
		for _, w := range tc.want {
			i := strings.Index(text[at:], w)
			require.GreaterOrEqual(t, i, 0, "%s/%s: %q lacks %q", tc.status, tc.handler, text, w)
			at += i + len(w)
		}
		for _, w := range tc.not {
			require.NotContains(t, text, w, "%s/%s", tc.status, tc.handler)
		}
		require.Zero(t, doc.Find("[data-testid=event-message]").Length())
	}

	doc := renderInboxEvent(t, InboxEvent{ID: "7", Status: "processed", Handler: "sql",
		Messages: []InboxMessage{{ID: 41, Topic: "order.paid", Destination: "billing", State: "pending"}}})
	require.Equal(t, 1, doc.Find("[data-testid=event-message]").Length(), "a linked message is listed, whatever the handler")
	require.Equal(t, "/messages/41", doc.Find("[data-testid=event-message-link]").AttrOr("href", ""))
	require.Zero(t, doc.Find("[data-testid=event-messages-none]").Length())
}

// A parked event's triage item is a card of its own right under the
// event's facts, inside the live region, before the retry and the
// attempts; without an item there is no card.
func TestInboxEventTriageCardFollowsTheFacts(t *testing.T) {
	t.Parallel()
	item := TriageItemView{ID: 3, Href: "/triage/items/3", Status: "open", Version: 2}
	doc := renderInboxEvent(t, InboxEvent{ID: "7", Status: "parked", Triage: &item, CanRetry: true, CanOperate: true, RetryRequestID: "r"})
	facts := doc.Find("dl[data-testid=inbox-event]")
	require.Equal(t, 1, facts.Length())
	next := facts.Next()
	require.Equal(t, "inbox-event-triage", next.AttrOr("data-testid", ""), "the triage card comes right after the facts")
	require.True(t, next.HasClass("facts"), "a card like the facts")
	require.Equal(t, "3", next.Find("[data-item-id]").AttrOr("data-item-id", ""))
	require.Equal(t, "event-retry", next.Next().AttrOr("data-testid", ""))
	require.Zero(t, doc.Find("script").Length(), "the live region loads no script: the page loads triage.js once")

	doc = renderInboxEvent(t, InboxEvent{ID: "7", Status: "failed"})
	require.Zero(t, doc.Find("[data-testid=inbox-event-triage]").Length())
}

// A processed event's recorded error is an earlier attempt's, not a
// current failure, and is labelled so on its page and in the list.
func TestProcessedEventsErrorIsLabelledEarlier(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Earlier handler error", InboxEvent{Status: "processed"}.ErrorLabel())
	require.Equal(t, "Earlier handler error", InboxEventRow{Status: "processed"}.ErrorLabel())
	for _, s := range []string{"failed", "parked", "received"} {
		require.Equal(t, "Handler error", InboxEvent{Status: s}.ErrorLabel(), s)
	}
}
