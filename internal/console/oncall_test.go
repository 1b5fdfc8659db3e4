package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
)

// page GETs path as the session token and parses it.
func (b accessBundle) page(t *testing.T, path, token string) *goquery.Document {
	t.Helper()
	rec := b.request(http.MethodGet, path, token, nil)
	require.Equal(t, http.StatusOK, rec.Code, "%s: %s", path, rec.Body.String())
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	return doc
}

// listedIDs is the message ids a list page shows, in order.
func listedIDs(doc *goquery.Document) []string {
	var ids []string
	doc.Find(`[data-testid="message-row"] td.num a`).Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, strings.TrimSpace(s.Text()))
	})
	return ids
}

// replayAs marks original replayed by a new row in state, as a replay the
// dispatcher later settled; job, when not nil, is its bulk job.
func replayAs(t *testing.T, b accessBundle, original int64, state string, job *uuid.UUID) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.outbox
		(topic, destination, payload, state, replay_of, replay_request, replay_mode, replay_actor, replay_job, finished_at)
		VALUES ('orders.created', 'billing', '{}', $2, $1, gen_random_uuid(), 'redeliver', 'otto', $3,
			CASE WHEN $2 = 'pending' THEN NULL ELSE now() END)
		RETURNING id`, original, state, job).Scan(&id))
	_, err := b.pool.Exec(ctx, `UPDATE switchyard.outbox SET replays = replays + 1, replayed_at = now() WHERE id = $1`, original)
	require.NoError(t, err)
	return id
}

// Issue 14, items 2 and 7: "dead" is dead and never replayed, in the list,
// its filter and the group page; a replayed original is "replayed", with
// its newest replay's outcome; discarded and replayed messages are listed
// by their own filters.
func TestMessageStatesAreOneDefinition(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	viewer := b.login(t, auth.Viewer)
	unresolved := deadMessage(t, b, `{"n":1}`)
	replayed := deadMessage(t, b, `{"n":2}`)
	replayAs(t, b, replayed, "delivered", nil)
	discarded := messageIn(t, b, "discarded", `{"n":3}`)

	require.Equal(t, []string{itoa(unresolved)}, listedIDs(b.page(t, "/messages?state=dead", viewer)))
	require.Equal(t, []string{itoa(unresolved)}, listedIDs(b.page(t, "/dead-letters/fp-422", viewer)),
		"the group lists what it counts")
	doc := b.page(t, "/messages?state=replayed", viewer)
	require.Equal(t, []string{itoa(replayed)}, listedIDs(doc))
	require.Equal(t, "→ delivered", strings.TrimSpace(doc.Find(`[data-testid="replay-outcome"]`).Text()))
	require.Equal(t, []string{itoa(discarded)}, listedIDs(b.page(t, "/messages?state=discarded", viewer)))

	doc = b.page(t, "/messages/"+itoa(replayed), viewer)
	status := doc.Find(`[data-testid="message-status"]`)
	require.Equal(t, "replayed", strings.TrimSpace(status.Find(".badge").First().Text()))
	require.Equal(t, "→ delivered", strings.TrimSpace(status.Find(`[data-testid="replay-outcome"]`).Text()))
	var states []string
	doc = b.page(t, "/messages", viewer)
	doc.Find(`[data-testid="filter-state"] option`).Each(func(_ int, s *goquery.Selection) {
		states = append(states, s.AttrOr("value", "?"))
	})
	require.Equal(t, []string{"", "pending", "delivered", "dead", "replayed", "discarded"}, states)
	require.Equal(t, http.StatusBadRequest, b.request(http.MethodGet, "/messages?state=gone", viewer, nil).Code)
}

// Issue 14, item 3: a job shows what became of its replays as they settle.
// Item 8: its cancel asks for confirmation (hx-confirm: no inline script).
func TestReplayJobShowsTheOutcomeOfItsReplays(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	var job uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO switchyard.replay_jobs
		(filter, filter_key, mode, actor, rate_per_sec, estimate, upper_id, replayed)
		VALUES ('{"fingerprint":"fp-422"}', '{"fingerprint":"fp-422"}', 'redeliver', 'otto', 50, 4, 100, 4) RETURNING id`).Scan(&job))
	for _, state := range []string{"delivered", "delivered", "dead", "pending"} {
		replayAs(t, b, deadMessage(t, b, `{}`), state, &job)
	}
	other := uuid.New() // another job's replay counts for that job only
	replayAs(t, b, deadMessage(t, b, `{}`), "dead", &other)

	doc := b.page(t, "/replays", operator)
	row := doc.Find(`[data-testid="replay-job"][data-job-id="` + job.String() + `"]`)
	require.Equal(t, 1, row.Length())
	require.Equal(t, "2 delivered", strings.TrimSpace(row.Find(`[data-testid="job-delivered"]`).Text()))
	require.Equal(t, "1 dead again", strings.TrimSpace(row.Find(`[data-testid="job-dead-again"]`).Text()))
	require.Equal(t, "1 pending", strings.TrimSpace(row.Find(`[data-testid="job-pending"]`).Text()))
	confirm, ok := row.Find(`[data-testid="job-cancel"]`).Attr("hx-confirm")
	require.True(t, ok, "cancel asks first")
	require.Contains(t, confirm, "Cancel this bulk replay?")

	// The JSON API tells the same outcomes.
	rec := b.api(http.MethodGet, "/api/replay-jobs/"+job.String(), operator, "", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var view console.JobView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &view))
	require.Equal(t, [3]int64{2, 1, 1}, [3]int64{view.Delivered, view.DeadAgain, view.Pending}, rec.Body.String())
}

// Issue 14, item 4: a list filtered by a topic prefix and a from/to window
// sends both to bulk replay, whose form shows them and estimates the
// messages the list shows (none of those just outside a bound); the job
// records the filter in its canonical spelling, also in its audit row. A
// list filter that no job can take says why instead of a link.
func TestListFilterBecomesTheSameBulkReplay(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	from := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for _, m := range []struct {
		topic   string
		created time.Duration
	}{
		{"orders.created", 0}, {"orders.paid", time.Hour - time.Microsecond}, {"orders.created", -time.Microsecond},
		{"orders.created", time.Hour}, {"orders", time.Minute}, {"ordersx.created", time.Minute},
	} {
		id := deadMessage(t, b, `{}`)
		_, err := b.pool.Exec(context.Background(), `UPDATE switchyard.outbox SET topic = $2, created_at = $3 WHERE id = $1`,
			id, m.topic, from.Add(m.created))
		require.NoError(t, err)
	}
	list := "/messages?state=dead&topic=orders.&from=2026-11-30T14:00&to=2026-11-30T15:00"
	listed := listedIDs(b.page(t, list, operator))
	require.Len(t, listed, 2, "the two messages inside every bound")

	link, ok := b.page(t, list, operator).Find(`[data-testid="messages-bulk-replay"]`).Attr("href")
	require.True(t, ok, "a prefix and a window are offered to bulk replay")
	require.Equal(t, "/replays?created_from=2026-11-30T14%3A00&created_to=2026-11-30T15%3A00&topic=orders.", link)
	form := b.page(t, link, operator).Find(`[data-testid="bulk-form"]`)
	values := url.Values{"request_id": {uuid.NewString()}, "mode": {"redeliver"}, "rate": {"50"}}
	for _, name := range []string{"topic", "created_from", "created_to"} {
		values.Set(name, form.Find(`input[name="`+name+`"]`).AttrOr("value", "?"))
	}
	require.Equal(t, url.Values{"topic": {"orders."}, "created_from": {"2026-11-30T14:00"}, "created_to": {"2026-11-30T15:00"}},
		url.Values{"topic": values["topic"], "created_from": values["created_from"], "created_to": values["created_to"]})

	rec := b.request(http.MethodPost, "/replays/estimate", operator, values)
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	require.Equal(t, "2 dead messages match.", strings.TrimSpace(doc.Find(`[data-testid="bulk-estimate-count"]`).Text()))
	rec = b.request(http.MethodPost, "/replays", operator, values)
	require.Equal(t, http.StatusOK, rec.Code)
	want := `{"topic":"orders.*","created_from":"2026-11-30T14:00:00Z","created_to":"2026-11-30T15:00:00Z"}`
	var filter, detail string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT j.filter::text, a.detail->>'filter' FROM switchyard.replay_jobs j
		JOIN switchyard.audit_log a ON a.target = 'replay job ' || j.id AND a.action = 'replay_job.start'`).Scan(&filter, &detail))
	require.JSONEq(t, want, filter)
	require.JSONEq(t, want, detail)

	for path, why := range map[string]string{
		"/messages?state=delivered&topic=orders.": "dead messages only",
		"/messages?topic=orders.&id=" + listed[0]: "No bulk replay for a message id",
	} {
		doc := b.page(t, path, operator)
		require.Zero(t, doc.Find(`[data-testid="messages-bulk-replay"]`).Length(), path)
		require.Contains(t, doc.Find(`[data-testid="messages-bulk-replay-unavailable"]`).Text(), why, path)
	}
}

// Issue 14, item 4: "Replay this group" opens bulk replay filtered to the
// group, and a message list's filter goes to bulk replay the same way;
// the form takes its fields from the query and starts nothing.
func TestBulkReplayOpensFilteredFromAGroupOrAList(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	deadMessage(t, b, `{}`)

	link, ok := b.page(t, "/dead-letters/fp-422", operator).Find(`[data-testid="bulk-replay-link"]`).Attr("href")
	require.True(t, ok)
	require.Equal(t, "/replays?fingerprint=fp-422", link)
	doc := b.page(t, link, operator)
	require.Equal(t, "fp-422", doc.Find(`[data-testid="bulk-form"] input[name="fingerprint"]`).AttrOr("value", "?"))

	link, ok = b.page(t, "/messages?state=dead&destination=billing&error=422", operator).Find(`[data-testid="messages-bulk-replay"]`).Attr("href")
	require.True(t, ok)
	require.Equal(t, "/replays?destination=billing&error_contains=422", link)
	doc = b.page(t, link, operator)
	form := doc.Find(`[data-testid="bulk-form"]`)
	require.Equal(t, "billing", form.Find(`input[name="destination"]`).AttrOr("value", "?"))
	require.Equal(t, "422", form.Find(`input[name="error_contains"]`).AttrOr("value", "?"))
	require.Zero(t, countRows(t, b, `SELECT count(*) FROM switchyard.replay_jobs`), "opening the form starts nothing")
	require.Zero(t, b.page(t, "/messages?state=delivered&destination=billing", operator).Find(`[data-testid="messages-bulk-replay"]`).Length(),
		"delivered messages are not bulk replayed")
}

// Issue 14, item 8: a message's actions page shows its headers and its
// newest attempts beside the buttons, newest first.
func TestMessageActionsShowHeadersAndLastAttempts(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	id := deadMessage(t, b, `{}`)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `UPDATE switchyard.outbox SET headers = '{"traceparent": "00-abc-01"}' WHERE id = $1`, id)
	require.NoError(t, err)
	for n := 1; n <= 7; n++ {
		_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.outbox_attempts
			(message_id, attempt, worker, lease_version, started_at, finished_at, outcome, applied, status_code, error, duration_ms)
			VALUES ($1, $2::int, 'w1', $2::int, now(), now(), CASE WHEN $2::int = 7 THEN 'dead' ELSE 'retry' END, true, 422, 'HTTP 422: rejected', 12)`, id, n)
		require.NoError(t, err)
	}
	recent := b.page(t, "/messages/"+itoa(id)+"/actions", operator).Find(`[data-testid="message-recent"]`)
	require.Equal(t, "traceparent", strings.TrimSpace(recent.Find(`[data-testid="headers"] th`).Text()))
	require.Equal(t, "00-abc-01", strings.TrimSpace(recent.Find(`[data-testid="headers"] td`).Text()))
	var numbers []string
	recent.Find(`[data-testid="attempt-row"] td.num:first-child`).Each(func(_ int, s *goquery.Selection) {
		numbers = append(numbers, strings.TrimSpace(s.Text()))
	})
	require.Equal(t, []string{"7", "6", "5", "4", "3"}, numbers, "the five newest, newest first")
}

// blockedHead writes a dead head that blocks aggregate order/agg and
// returns its id.
func blockedHead(t *testing.T, b accessBundle, agg string) int64 {
	t.Helper()
	ctx := context.Background()
	deadMessage(t, b, `{"n":0}`) // makes the destination
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.outbox
		(topic, destination, aggregate_type, aggregate_id, payload, state, attempts, last_error, error_fingerprint, finished_at)
		VALUES ('orders.created', 'billing', 'order', $1, '{"n":7}', 'dead', 3, 'HTTP 422: rejected', 'fp-422', now())
		RETURNING id`, agg).Scan(&id))
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		VALUES ('billing', 'order', $2, $1)`, id, agg)
	require.NoError(t, err)
	return id
}

// Issue 14, item 5: a blocked aggregate's row replays or discards its
// head (operator, audited, once per request id), and the page sends every
// blocked head to bulk replay, which replays only those.
func TestBlockedAggregatesUnblockFromTheirRows(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	replayHead, discardHead := blockedHead(t, b, "o-1"), blockedHead(t, b, "o-2")
	blocked := func() int { return countRows(t, b, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`) }

	doc := b.page(t, "/aggregates/blocked", b.login(t, auth.Viewer))
	require.Zero(t, doc.Find(`[data-testid="head-replay"]`).Length(), "viewers get no buttons")
	doc = b.page(t, "/aggregates/blocked", operator)
	require.Equal(t, 2, doc.Find(`[data-testid="head-replay"]`).Length())
	confirm, _ := doc.Find(`[data-testid="head-discard"]`).First().Attr("hx-confirm")
	require.Contains(t, confirm, "Discard message")
	bulk, ok := doc.Find(`[data-testid="blocked-bulk-replay"]`).Attr("href")
	require.True(t, ok)
	require.Equal(t, "/replays?blocked_heads=true", bulk)
	_, checked := b.page(t, bulk, operator).Find(`[data-testid="bulk-blocked-heads"]`).Attr("checked")
	require.True(t, checked, "the bulk form opens limited to blocked heads")
	form := url.Values{"request_id": {uuid.NewString()}, "blocked_heads": {"true"}, "mode": {"redeliver"}}
	estimate := b.request(http.MethodPost, "/replays/estimate", operator, form)
	require.Contains(t, estimate.Body.String(), "2 dead messages match.", "only the heads, not the other dead letters")

	rid := uuid.NewString()
	for range 2 { // a double click: one replay
		rec := b.request(http.MethodPost, "/aggregates/blocked/"+itoa(replayHead)+"/replay", operator, url.Values{"request_id": {rid}})
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Contains(t, rec.Body.String(), "the aggregate flows again")
	}
	require.Equal(t, 1, replaysOf(t, b, replayHead))
	require.Equal(t, 1, auditRows(t, b, rid))
	require.Equal(t, 1, blocked())

	rid = uuid.NewString()
	rec := b.request(http.MethodPost, "/aggregates/blocked/"+itoa(discardHead)+"/discard", operator, url.Values{"request_id": {rid}})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "blocked-changed", rec.Header().Get("HX-Trigger"))
	require.Zero(t, blocked())
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND state = 'discarded'`, discardHead))

	rec = b.request(http.MethodPost, "/aggregates/blocked/"+itoa(discardHead)+"/discard", operator, url.Values{"request_id": {uuid.NewString()}})
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `role="alert"`, "a refusal is shown in place")
}
