package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/web/static"
)

// deadMessage writes a dead message (as a dispatcher leaves one) and
// returns its id.
func deadMessage(t *testing.T, b accessBundle, payload string) int64 {
	t.Helper()
	return messageIn(t, b, "dead", payload)
}

func messageIn(t *testing.T, b accessBundle, state, payload string) int64 {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.destinations (name, kind, address)
		VALUES ('billing', 'function', 'billing') ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	var id int64
	err = b.pool.QueryRow(context.Background(), `INSERT INTO switchyard.outbox
		(topic, destination, payload, state, attempts, last_error, error_fingerprint, finished_at)
		VALUES ('orders.created', 'billing', $1, $2, 3, 'HTTP 422: rejected', 'fp-422',
			CASE WHEN $2 = 'pending' THEN NULL ELSE now() END)
		RETURNING id`, payload, state).Scan(&id)
	require.NoError(t, err)
	if state == "dead" {
		// The group the dispatcher keeps for every dead message.
		_, err = b.pool.Exec(context.Background(), `INSERT INTO switchyard.dead_letter_groups
			(fingerprint, dead, first_dead_at, last_dead_at, sample_id) VALUES ('fp-422', 1, now(), now(), $1)
			ON CONFLICT (fingerprint) DO UPDATE SET dead = dead_letter_groups.dead + 1`, id)
		require.NoError(t, err)
	}
	return id
}

// api sends a JSON API request as a script would: the session cookie, the
// body, and the request id as the Idempotency-Key.
func (b accessBundle) api(method, path, token, key string, body any) *httptest.ResponseRecorder {
	var r *bytes.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	} else {
		r = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, r)
	req.RemoteAddr = "192.0.2.10:41000"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

func countRows(t *testing.T, b accessBundle, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func replaysOf(t *testing.T, b accessBundle, id int64) int {
	return countRows(t, b, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, id)
}

func auditRows(t *testing.T, b accessBundle, requestID string) int {
	return countRows(t, b, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1`, requestID)
}

func replayBody(mode, reason string, payload json.RawMessage, rid string) map[string]any {
	m := map[string]any{"mode": mode, "reason": reason, "request_id": rid}
	if payload != nil {
		m["payload"] = payload
	}
	return m
}

func TestActionAPIRoles(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	viewer, operator, admin := b.login(t, auth.Viewer), b.login(t, auth.Operator), b.login(t, auth.Admin)
	id := deadMessage(t, b, `{"order":1,"total":10}`)
	path := "/api/messages/" + itoa(id)

	// A viewer is refused every action. The first refusal is recorded
	// (outcome denied); the next ones within the minute are only counted,
	// so that refusals cannot flood the trail.
	for i, p := range []string{path + "/replay", path + "/discard", path + "/restore", "/api/replay-jobs", "/api/replay-jobs/estimate"} {
		rid := uuid.NewString()
		rec := b.api(http.MethodPost, p, viewer, rid, replayBody("redeliver", "", nil, rid))
		require.Equal(t, http.StatusForbidden, rec.Code, p)
		want := 0
		if i == 0 {
			want = 1
		}
		require.Equal(t, want, countRows(t, b, `SELECT count(*) FROM switchyard.audit_log
			WHERE request_id = $1 AND actor = 'viewer' AND action = 'access.denied' AND outcome = 'denied'
				AND target = $2 AND detail->>'need' = 'operator'`, rid, "POST "+p), p)
	}
	require.Zero(t, replaysOf(t, b, id))
	// Without a session: 401, not a redirect.
	rec := b.api(http.MethodPost, path+"/replay", "", "", nil)
	require.Equal(t, http.StatusUnauthorized, rec.Code)

	// An operator may not edit the payload.
	rid := uuid.NewString()
	rec = b.api(http.MethodPost, path+"/replay", operator, rid, replayBody("reapply", "fix total", json.RawMessage(`{"order":1,"total":12}`), rid))
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "admin")
	require.Zero(t, replaysOf(t, b, id))
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.audit_log
		WHERE request_id = $1 AND actor = 'operator' AND outcome = 'denied' AND detail->>'need' = 'admin'`, rid), "the refused edit is recorded")

	// Re-apply without a reason is refused, saying why.
	rid = uuid.NewString()
	rec = b.api(http.MethodPost, path+"/replay", operator, rid, replayBody("reapply", "", nil, rid))
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	require.Contains(t, rec.Body.String(), "reason")
	require.Zero(t, auditRows(t, b, rid), "a refused action records nothing")

	// An admin edits and replays: the original is unchanged, the audit row
	// keeps both payloads.
	rid = uuid.NewString()
	rec = b.api(http.MethodPost, path+"/replay", admin, rid, replayBody("reapply", "fix total", json.RawMessage(`{"order":1,"total":12}`), rid))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var got console.ReplayResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	var original, replayed string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT o.payload::text, r.payload::text FROM switchyard.outbox o, switchyard.outbox r
		WHERE o.id = $1 AND r.id = $2 AND r.replay_of = o.id`, id, got.ReplayID).Scan(&original, &replayed))
	require.JSONEq(t, `{"order":1,"total":10}`, original)
	require.JSONEq(t, `{"order":1,"total":12}`, replayed)
	var detail map[string]json.RawMessage
	var action, actor string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT action, actor, detail FROM switchyard.audit_log WHERE request_id = $1`, rid).Scan(&action, &actor, &detail))
	require.Equal(t, "message.edit_replay", action)
	require.Equal(t, "admin", actor)
	require.JSONEq(t, `{"order":1,"total":10}`, string(detail["original_payload"]))
	require.JSONEq(t, `{"order":1,"total":12}`, string(detail["payload"]))
	require.Equal(t, 1, auditRows(t, b, rid))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A double click or a retry sends one request id many times at once, to
// two console instances: one replay, one audit row; every answer is the
// stored response or 409 (in flight). A later retry gets the stored
// response byte for byte.
func TestReplayWithOneRequestIDCreatesOneReplay(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	instances := []accessBundle{b, b.anotherInstance(t)}
	operator := b.login(t, auth.Operator)
	id := deadMessage(t, b, `{"n":1}`)
	rid := uuid.NewString()
	body := replayBody("redeliver", "", nil, rid)

	const n = 50
	codes := make([]int, n)
	bodies := make([]string, n)
	testwait.Together(n, func(i int) {
		rec := instances[i%2].api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, rid, body)
		codes[i], bodies[i] = rec.Code, rec.Body.String()
	})
	created, conflicts := 0, 0
	var first string
	for i, code := range codes {
		switch code {
		case http.StatusCreated:
			created++
			if first == "" {
				first = bodies[i]
			}
			require.Equal(t, first, bodies[i], "every success is the stored response")
		case http.StatusConflict:
			conflicts++
		default:
			t.Fatalf("unexpected answer %d: %s", code, bodies[i])
		}
	}
	require.Equal(t, n, created+conflicts)
	require.GreaterOrEqual(t, created, 1)
	require.Equal(t, 1, replaysOf(t, b, id))
	require.Equal(t, 1, auditRows(t, b, rid))

	for _, instance := range instances {
		rec := instance.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, rid, body)
		require.Equal(t, http.StatusCreated, rec.Code)
		require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
		require.Equal(t, first, rec.Body.String())
	}
	require.Equal(t, 1, replaysOf(t, b, id))
	require.Equal(t, 1, auditRows(t, b, rid))
}

// anotherInstance is a second console on b's database, as another process
// would be: its own handler and echo, the same accounts.
func (b accessBundle) anotherInstance(t *testing.T) accessBundle {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	assets, err := static.New()
	require.NoError(t, err)
	registry := prometheus.NewRegistry()
	svc := testAuth(b.pool, auth.Config{})
	h := console.New(console.Deps{
		Logger: logger, Assets: assets, Gatherer: registry, Readiness: console.DatabaseReadiness{Pool: b.pool},
		Auth: svc, AuditLog: audit.Log{DB: b.pool}, DB: b.pool,
	})
	e, err := httpserver.New(httpserver.Config{
		Logger: logger, Registerer: registry, RenderError: h.RenderError, BodyLimit: h.BodyLimit, Streaming: console.Streaming,
		CSRF: &httpserver.CSRFConfig{Exempt: console.CSRFExempt, Session: h.SessionToken},
	})
	require.NoError(t, err)
	h.Register(e)
	return accessBundle{e: e, h: h, svc: svc, pool: b.pool}
}

// Two operators replay one message at once, each with a request id of
// their own: one replay; the other is told a replay is in flight.
func TestTwoOperatorsReplayingOneMessageMakeOneReplay(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	require.NoError(t, b.svc.AddUser(context.Background(), auth.CLI, "operator2", auth.Operator, password))
	first := b.login(t, auth.Operator)
	s, err := b.svc.Login(context.Background(), "operator2", password, "192.0.2.11")
	require.NoError(t, err)
	tokens := []string{first, s.Token}
	id := deadMessage(t, b, `{"n":2}`)

	recs := make([]*httptest.ResponseRecorder, len(tokens))
	rids := []string{uuid.NewString(), uuid.NewString()}
	testwait.Together(len(tokens), func(i int) {
		recs[i] = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", tokens[i], rids[i], replayBody("redeliver", "", nil, rids[i]))
	})
	codes := []int{recs[0].Code, recs[1].Code}
	require.ElementsMatch(t, []int{http.StatusCreated, http.StatusConflict}, codes, recs[0].Body.String()+recs[1].Body.String())
	loser := 0
	if recs[0].Code == http.StatusCreated {
		loser = 1
	}
	require.Contains(t, recs[loser].Body.String(), "still in flight")
	require.Equal(t, 1, replaysOf(t, b, id))
	require.Equal(t, 1, auditRows(t, b, rids[1-loser]))
	require.Zero(t, auditRows(t, b, rids[loser]))
}

// A message still pending (or delivered) cannot be replayed or discarded;
// the answer says why, and nothing is recorded.
func TestReplayOfAMessageNotDeadIsRefused(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	for _, state := range []string{"pending", "delivered"} {
		id := messageIn(t, b, state, `{"n":3}`)
		for _, action := range []string{"replay", "discard"} {
			rid := uuid.NewString()
			var body any = replayBody("redeliver", "", nil, rid)
			if action == "discard" {
				body = map[string]string{"request_id": rid}
			}
			rec := b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/"+action, operator, rid, body)
			require.Equal(t, http.StatusConflict, rec.Code, state+" "+action)
			require.Contains(t, rec.Body.String(), "this one is not dead (it is "+state+")")
			require.Zero(t, auditRows(t, b, rid))
		}
		require.Zero(t, replaysOf(t, b, id))
	}
	rid := uuid.NewString()
	rec := b.api(http.MethodPost, "/api/messages/999999/replay", operator, rid, replayBody("redeliver", "", nil, rid))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// Discard and restore each write one audit row with their request id.
func TestDiscardAndRestoreAreAudited(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	id := deadMessage(t, b, `{"n":4}`)
	state := func() string {
		var s string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state FROM switchyard.outbox WHERE id = $1`, id).Scan(&s))
		return s
	}
	discard := uuid.NewString()
	rec := b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/discard", operator, discard, map[string]string{"reason": "obsolete", "request_id": discard})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "discarded", state())
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND action = 'message.discard' AND reason = 'obsolete' AND outcome = 'ok'`, discard))

	// Replaying a discarded message is refused.
	rid := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, rid, replayBody("redeliver", "", nil, rid))
	require.Equal(t, http.StatusConflict, rec.Code)

	restore := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/restore", operator, restore, map[string]string{"request_id": restore})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "dead", state())
	require.Equal(t, 1, auditRows(t, b, restore))

	// Restoring again: refused, not recorded.
	again := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/restore", operator, again, map[string]string{"request_id": again})
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Zero(t, auditRows(t, b, again))

	// A request id in the body that differs from the header is refused.
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/discard", operator, uuid.NewString(), map[string]string{"request_id": uuid.NewString()})
	require.Equal(t, http.StatusBadRequest, rec.Code)
}

// The actions panel: a viewer sees the message but no control; an
// operator sees replay and discard but not edit; an admin sees edit too.
// Its form replays once, and the re-rendered panel says so.
func TestMessageActionsPanel(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	id := deadMessage(t, b, `{"n":6}`)
	page := "/messages/" + itoa(id) + "/actions"
	controls := func(role auth.Role) (*goquery.Document, map[string]bool) {
		rec := b.request(http.MethodGet, page, b.login(t, role), nil)
		require.Equal(t, http.StatusOK, rec.Code)
		doc, err := goquery.NewDocumentFromReader(rec.Body)
		require.NoError(t, err)
		seen := map[string]bool{}
		for _, id := range []string{"replay-submit", "discard-submit", "edit-replay", "no-actions"} {
			seen[id] = doc.Find(`[data-testid="`+id+`"]`).Length() == 1
		}
		return doc, seen
	}
	_, seen := controls(auth.Viewer)
	require.Equal(t, map[string]bool{"replay-submit": false, "discard-submit": false, "edit-replay": false, "no-actions": true}, seen)
	_, seen = controls(auth.Operator)
	require.Equal(t, map[string]bool{"replay-submit": true, "discard-submit": true, "edit-replay": false, "no-actions": false}, seen)
	doc, seen := controls(auth.Admin)
	require.Equal(t, map[string]bool{"replay-submit": true, "discard-submit": true, "edit-replay": true, "no-actions": false}, seen)

	rid, ok := doc.Find(`[data-testid="replay-form"] input[name="request_id"]`).Attr("value")
	require.True(t, ok)
	headers, _ := doc.Find(`[data-testid="replay-form"]`).Attr("hx-headers")
	require.JSONEq(t, `{"Idempotency-Key":"`+rid+`"}`, headers)

	operator := b.login(t, auth.Operator)
	form := url.Values{"request_id": {rid}, "mode": {"reapply"}, "reason": {""}}
	rec := b.request(http.MethodPost, page+"/replay", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "needs a reason")
	require.Zero(t, replaysOf(t, b, id))

	form = url.Values{"request_id": {uuid.NewString()}, "mode": {"redeliver"}}
	rec = b.request(http.MethodPost, page+"/replay", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "Replayed (redeliver) as message")
	require.Equal(t, 1, replaysOf(t, b, id))
	// The re-rendered panel offers no second replay while this one is in
	// flight.
	require.NotContains(t, rec.Body.String(), `data-testid="replay-submit"`)
	require.Contains(t, rec.Body.String(), "in flight")
}

// Edit and replay through the panel: invalid JSON is refused before any
// diff; a valid edit shows the diff and creates nothing until confirmed.
func TestEditPreviewValidatesAndCreatesNothing(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	admin := b.login(t, auth.Admin)
	id := deadMessage(t, b, `{"a":1,"b":2}`)
	page := "/messages/" + itoa(id) + "/actions"

	rec := b.request(http.MethodPost, page+"/edit-preview", admin, url.Values{"payload": {`{"a":1,`}, "mode": {"reapply"}, "reason": {"x"}})
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "not valid JSON")

	rec = b.request(http.MethodPost, page+"/edit-preview", admin, url.Values{"payload": {`{"a":1,"b":3}`}, "mode": {"reapply"}, "reason": {"fix b"}})
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	require.Equal(t, `-   "b": 2`, strings.TrimSpace(doc.Find(`[data-testid="diff-removed"]`).Text()))
	require.Equal(t, `+   "b": 3`, strings.TrimSpace(doc.Find(`[data-testid="diff-added"]`).Text()))
	rid, ok := doc.Find(`[data-testid="edit-confirm-form"] input[name="request_id"]`).Attr("value")
	require.True(t, ok)
	headers, _ := doc.Find(`[data-testid="edit-confirm-form"]`).Attr("hx-headers")
	require.JSONEq(t, `{"Idempotency-Key":"`+rid+`"}`, headers, "the confirm sends its request id as the key")
	require.Zero(t, replaysOf(t, b, id))

	// An operator may not preview or confirm an edit.
	operator := b.login(t, auth.Operator)
	rec = b.request(http.MethodPost, page+"/edit-replay", operator, url.Values{"request_id": {rid}, "payload": {`{"a":1,"b":3}`}, "mode": {"reapply"}, "reason": {"fix b"}})
	require.Equal(t, http.StatusForbidden, rec.Code)

	rec = b.request(http.MethodPost, page+"/edit-replay", admin, url.Values{"request_id": {rid}, "payload": {`{"a":1,"b":3}`}, "mode": {"reapply"}, "reason": {"fix b"}})
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "Replayed with the edited payload (reapply)")
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1 AND payload::jsonb = '{"a":1,"b":3}'::jsonb`, id))
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND payload::jsonb = '{"a":1,"b":2}'::jsonb`, id))
	require.Equal(t, 1, auditRows(t, b, rid))
}

// Unblocking an aggregate: its dead head's panel says it blocks, and
// discarding it (or replaying it) through the API unblocks the aggregate.
func TestDiscardingADeadHeadUnblocksItsAggregate(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	ctx := context.Background()
	operator := b.login(t, auth.Operator)
	heads := map[string]int64{}
	for _, agg := range []string{"o-1", "o-2"} {
		deadMessage(t, b, `{"n":0}`) // makes the destination
		var id int64
		// The sequence trigger numbers it within its aggregate, as for
		// any enqueued message.
		require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.outbox
			(topic, destination, aggregate_type, aggregate_id, payload, state, attempts, last_error, error_fingerprint, finished_at)
			VALUES ('orders.created', 'billing', 'order', $1, '{"n":7}', 'dead', 3, 'HTTP 422: rejected', 'fp-422', now())
			RETURNING id`, agg).Scan(&id))
		_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
			VALUES ('billing', 'order', $2, $1)`, id, agg)
		require.NoError(t, err)
		heads[agg] = id
	}
	blocked := func(agg string) int {
		return countRows(t, b, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates WHERE aggregate_id = $1`, agg)
	}
	rec := b.request(http.MethodGet, "/messages/"+itoa(heads["o-1"])+"/actions", operator, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "This message blocks aggregate <bdi>order/o-1</bdi>", "the aggregate isolated inside the sentence")

	rid := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(heads["o-1"])+"/discard", operator, rid, map[string]string{"request_id": rid, "reason": "superseded"})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Zero(t, blocked("o-1"))

	rid = uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(heads["o-2"])+"/replay", operator, rid, replayBody("redeliver", "", nil, rid))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.Zero(t, blocked("o-2"))
	rec = b.request(http.MethodGet, "/messages/"+itoa(heads["o-2"])+"/actions", operator, nil)
	require.NotContains(t, rec.Body.String(), "blocks aggregate")
}

// A cross-site POST that carries a valid session cookie is refused before
// any action runs.
func TestCrossSiteActionIsRefused(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	id := deadMessage(t, b, `{"n":8}`)
	rid := uuid.NewString()
	raw, err := json.Marshal(replayBody("redeliver", "", nil, rid))
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", bytes.NewReader(raw))
	req.RemoteAddr = "192.0.2.10:41000"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Idempotency-Key", rid)
	req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: operator})
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Zero(t, replaysOf(t, b, id))
	require.Zero(t, auditRows(t, b, rid))
}

// A replay wakes every dispatcher after it commits (a NOTIFY on the
// outbox's channel), so the new row is claimed at once, not at the next
// idle poll.
func TestReplayWakesTheDispatchers(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	id := deadMessage(t, b, `{"n":4}`)
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN switchyard_outbox`)
	require.NoError(t, err)

	rid := uuid.NewString()
	rec := b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, rid, replayBody("redeliver", "", nil, rid))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wait)
	require.NoError(t, err, "no wake-up within 5 s of the replay")
	require.Equal(t, "switchyard_outbox", n.Channel)
}
