package console_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
)

// The fields console routes read: from the query string, from a form,
// from a JSON body (filter is the bulk replay's nested filter).
var (
	queryFields = []string{"state", "topic", "destination", "aggregate_type", "aggregate_id", "id", "error",
		"from", "to", "before", "after", "actor", "action", "status", "source", "kind", "subject", "above",
		"next", "prev", "seen", "saved", "fresh", "changed", "v", "check", "deleted", "renamed", "name", "mine", "unassigned",
		"fingerprint", "error_contains", "created_from", "created_to", "blocked_heads", "stage", "leased_by"}
	formFields = []string{"reason", "request_id", "mode", "payload", "topic", "rate", "password", "name",
		"next", "new_password", "new_password_again", "current_password", "fingerprint", "error_contains",
		"destination", "aggregate_type", "aggregate_id", "all", "estimate", "_csrf",
		// The configuration forms (destination_form.go, source_form.go).
		"kind", "address", "secret_refs", "concurrency", "rate_per_second", "burst", "timeout_ms",
		"breaker_failure_percent", "breaker_min_requests", "breaker_open_ms", "retry_base_ms", "retry_cap_ms",
		"max_attempts", "permanent", "permanent_statuses", "enabled", "scheme", "handler", "forward_to",
		"entity_field", "sql_function", "tolerance_seconds", "out_of_order",
		// Bulk replay's created window and blocked heads, renames, confirmations.
		"created_from", "created_to", "blocked_heads", "new_name", "confirm", "check"}
	jsonFields = []string{"reason", "request_id", "mode", "payload", "all", "estimate", "rate_per_second",
		"filter", "filter.topic", "filter.destination", "filter.fingerprint", "filter.aggregate_type",
		"filter.aggregate_id", "filter.error_contains", "filter.dead_from", "filter.dead_to",
		"filter.created_from", "filter.created_to", "filter.blocked_heads"}
)

// cursorOf is a keyset cursor as the list pages encode them, holding v.
func cursorOf(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hostileValues are what a careless or hostile client sends: NUL bytes,
// invalid UTF-8, oversized strings, numbers out of range, and cursors
// that decode to all of those.
var hostileValues = []string{
	"\x00", "a\x00b", "\xff", "%ff", strings.Repeat("x", 3000), "-1", "99999999999999999999", "bogus", "\u202eevil",
	cursorOf(map[string]any{"t": "2026-13-45T99:99:99Z", "id": -1}),
	cursorOf(map[string]string{"f": strings.Repeat("f", 3000)}),
	cursorOf(map[string]string{"t": "2026-11-29T14:30:00Z", "f": "\u0000", "d": "\u0000", "y": "\u0000", "i": "\u0000"}),
	base64.RawURLEncoding.EncodeToString([]byte("{\"t\":\"2026-11-29T14:30:00Z\",\"f\":\"\xff\",\"d\":\"\xff\",\"y\":\"\xff\",\"i\":\"\xff\"}")),
	"2026-11-29T14:30\x00",
}

// cursorFields are the query fields that hold a keyset cursor
// (pages_cursor.go). Only they get the values that decode as a cursor: to
// any other field those are one more string that is not what it takes,
// which "bogus" already is.
var cursorFields = []string{"next", "prev"}

// isCursor reports whether v is one of hostileValues' cursors.
func isCursor(v string) bool {
	var fields map[string]any
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && json.Unmarshal(b, &fields) == nil
}

// errorLog counts the error records of the console's logger.
type errorLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *errorLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// cancelOnHeader ends the request once its response starts, so that the
// live stream answers its status and returns.
type cancelOnHeader struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (w cancelOnHeader) WriteHeader(code int) {
	w.ResponseRecorder.WriteHeader(code)
	w.cancel()
}

// Every route of the table, as an admin, with hostile values in every
// query parameter, path parameter and body field (form and JSON) it may
// take: no answer is a 5xx, and nothing is logged as an error.
func TestHostileInputNeverFailsTheServer(t *testing.T) {
	t.Parallel()
	logs := &errorLog{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	pool := dbtest.New(t)
	listener := changefeed.NewListener(pool, changefeed.Config{})
	require.NoError(t, listener.Start(context.Background()))
	t.Cleanup(listener.Stop)
	hub := sse.New(listener, sse.Config{})
	t.Cleanup(hub.Close)
	// Triage is wired as console serve wires it, so that /ws and the
	// mutation fallback are walked, not answered "unavailable".
	guard := auth.NewStreamGuard()
	engine := &triage.Engine{Pool: pool, Logger: logger}
	socket := ws.New(ws.Config{Engine: engine, Presence: &triage.Presence{Pool: pool, Instance: "hostile", Logger: logger}, Streams: guard, Logger: logger})
	require.NoError(t, socket.Start(context.Background()))
	t.Cleanup(socket.Stop)
	b := setupAccessLogged(t, logger, false, hub, guard, pool, func(d *console.Deps) {
		d.ListRate = rate.Inf // every request reaches its handler
		d.Triage, d.TriageSocket = engine, socket
	})
	message, event := hostileFixtures(t, b)
	admin := b.login(t, auth.Admin)

	sent, failed, walked := 0, map[string]bool{}, map[string]bool{}
	for _, rt := range b.e.Routes() {
		if rt.Path == "/logout" {
			continue // it ends the session the walk signs in with; it reads no field
		}
		// The first route of each method gets every field with every
		// value; the others skip what the edge check refuses whatever the
		// route (edgeRefused), but one field of each kind.
		full := !walked[rt.Method]
		walked[rt.Method] = true
		for _, req := range hostileRoute(rt.Method, rt.Path, message, event, full) {
			req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: admin})
			sent++
			if status := serveHostile(b, req); status >= 500 {
				failed[fmt.Sprintf("%s %s: %s %s %q: %d", rt.Method, rt.Path, req.Header.Get("Content-Type"), req.URL.RawQuery, req.Header.Get("X-Hostile"), status)] = true
			}
		}
	}
	t.Logf("%d hostile requests", sent)
	require.Empty(t, strings.Join(slices.Sorted(maps.Keys(failed)), "\n"), "5xx answers to hostile input")
	require.Empty(t, logs.String(), "hostile input is a client error, never a logged failure")
}

// serveHostile sends req and returns the status of its answer.
func serveHostile(b accessBundle, req *http.Request) int {
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	defer cancel()
	rec := cancelOnHeader{httptest.NewRecorder(), cancel}
	b.e.ServeHTTP(rec, req.WithContext(ctx))
	return rec.Code
}

// edgeRefused reports whether the console's edge check (checkFields)
// refuses value in a query or form field of that name on every route,
// before any handler runs: a NUL, invalid UTF-8, or more characters than
// any field but the payload takes. Such a request proves the same on
// every route once the check is shown to guard the route, so the walk
// sends every field with it on one route per method and one field per
// kind (query, form) on the others: a third of the requests, and of the
// test's time, for nothing more.
func edgeRefused(name, value string) bool {
	return strings.ContainsRune(value, 0) || !utf8.ValidString(value) || (name != "payload" && len(value) > 2048)
}

// hostileRoute is every hostile request to the route: its parameters
// filled with hostile values; then, with the fixtures' ids in its path (so
// that the handler goes on to read its fields), each field alone with
// each hostile value, in the query and, for unsafe methods, in a form and
// in JSON; and a few whole JSON bodies. Unless full, a value the edge
// check refuses goes in the first query field and the first form field
// only (edgeRefused).
func hostileRoute(method, pattern string, message, event int64, full bool) []*http.Request {
	fill := func(v string) string {
		return strings.ReplaceAll(paramRe.ReplaceAllString(pattern, v), "*", v)
	}
	var reqs []*http.Request
	if strings.ContainsAny(pattern, ":*") {
		for _, v := range hostileValues {
			reqs = append(reqs, hostileRequest(method, fill(url.PathEscape(v)), "", "", "", v))
		}
		reqs = append(reqs, hostileRequest(method, fill("%ff"), "", "", "", "%ff"), hostileRequest(method, fill("%00"), "", "", "", "%00"))
	}
	path := fill(fmt.Sprint(message))
	switch {
	case strings.HasPrefix(pattern, "/inbox/events/"):
		path = fill(fmt.Sprint(event))
	case pattern == "/inbox/:source":
		path = fill("shop")
	}
	for _, v := range hostileValues {
		for i, name := range queryFields {
			if isCursor(v) && !slices.Contains(cursorFields, name) {
				continue
			}
			if full || i == 0 || !edgeRefused(name, v) {
				reqs = append(reqs, hostileRequest(method, path, queryOf(name, v), "", "", v))
			}
		}
		if method != http.MethodPost {
			continue
		}
		if isCursor(v) {
			continue // no form or JSON field takes a cursor
		}
		for i, name := range formFields {
			if full || i == 0 || !edgeRefused(name, v) {
				reqs = append(reqs, hostileRequest(method, path, "", "application/x-www-form-urlencoded", queryOf(name, v), v))
			}
		}
		for _, name := range jsonFields {
			reqs = append(reqs, hostileRequest(method, path, "", "application/json", jsonOf(name, v), v))
		}
	}
	if method == http.MethodPost {
		for _, body := range []string{`{"mode":"bogus"}`, `{"mode":"bogus","reason":"r","all":true}`, `[]`, `null`, `"x"`,
			`{"reason":"\u0000","request_id":"\u0000","filter":{"topic":"\u0000"}}`, "{\"reason\":\"\xff\"}", `{"filter":[]}`} {
			reqs = append(reqs, hostileRequest(method, path, "", "application/json", body, body))
		}
	}
	return reqs
}

// hostileRequest is one request; value is noted in X-Hostile for the
// failure message, and sent in the headers a console route reads too.
func hostileRequest(method, path, query, contentType, body, value string) *http.Request {
	req := httptest.NewRequest(method, "/", strings.NewReader(body))
	req.URL = &url.URL{Path: path, RawPath: path, RawQuery: query}
	req.RequestURI = req.URL.RequestURI()
	req.RemoteAddr = "192.0.2.10:41000"
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Accept", "text/html")
	req.Header.Set("X-Hostile", value)
	req.Header.Set("Last-Event-ID", value)
	req.Header.Set("HX-Current-URL", value)
	req.Header.Set("Idempotency-Key", value)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// queryOf encodes name=value; %ff is sent as the byte itself.
func queryOf(name, value string) string {
	if value == "%ff" {
		return name + "=%ff"
	}
	return url.Values{name: {value}}.Encode()
}

// jsonOf is a JSON object with value at name (filter.x: inside filter).
func jsonOf(name, value string) string {
	var body map[string]any
	if sub, ok := strings.CutPrefix(name, "filter."); ok {
		body = map[string]any{"filter": map[string]any{sub: value}}
	} else {
		body = map[string]any{name: value}
	}
	b, _ := json.Marshal(body)
	if value == "\xff" {
		b = bytes.ReplaceAll(b, []byte(`\ufffd`), []byte("\xff"))
	}
	return string(b)
}

// hostileFixtures are a dead message and an inbox event, whose pages the
// walk opens with hostile queries and bodies.
func hostileFixtures(t *testing.T, b accessBundle) (message, event int64) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('d', 'function')`)
	require.NoError(t, err)
	require.NoError(t, b.pool.QueryRow(ctx, `
		INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'd', '{}') RETURNING id`).Scan(&message))
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, headers, status)
		VALUES ('shop', 'e1', '{}', '{}', 'processed') RETURNING id`).Scan(&event))
	return message, event
}
