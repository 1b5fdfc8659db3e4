package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/static"
)

// triageSetup is the console in demo mode with triage, and one item whose
// title is markup.
func triageSetup(t *testing.T) (*echo.Echo, *pgxpool.Pool, int64) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	assets, err := static.New()
	require.NoError(t, err)
	registry := prometheus.NewRegistry()
	h := console.New(console.Deps{
		Logger: logger, Assets: assets, Gatherer: registry, DB: pool, Demo: true,
		Auth: testAuth(pool, auth.Config{}), AuditLog: audit.Log{DB: pool},
		Triage: &triage.Engine{Pool: pool},
	})
	e, err := httpserver.New(httpserver.Config{Logger: logger, Registerer: registry, RenderError: h.RenderError})
	require.NoError(t, err)
	h.Register(e)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return triage.Track(ctx, tx, triage.ReconcileFindings, json.RawMessage(`{"check": "c"}`), "<script>drift</script>", "test")
	}))
	var id int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT id FROM switchyard.triage_items").Scan(&id))
	return e, pool, id
}

// get serves a GET of path to the demo admin (a loopback peer).
func get(e *echo.Echo, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "127.0.0.1:41000"
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func postMutation(e *echo.Echo, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/triage/mutations", strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:41000"
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

// The HTTP fallback: the same Idempotency-Key (the mutation id) returns
// the same stored answer and changes nothing the second time.
func TestTriageFallbackReturnsTheStoredAnswer(t *testing.T) {
	t.Parallel()
	e, pool, id := triageSetup(t)
	key := uuid.NewString()
	body := `{"item": ` + strconv.FormatInt(id, 10) + `, "op": "claim", "seen_version": 1}`
	first, again := postMutation(e, key, body), postMutation(e, key, body)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	require.Equal(t, first.Code, again.Code)
	require.JSONEq(t, first.Body.String(), again.Body.String())
	var events int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.triage_events WHERE op = 'claim'").Scan(&events))
	require.Equal(t, 1, events)

	stale := postMutation(e, uuid.NewString(), body)
	require.Equal(t, http.StatusConflict, stale.Code, "the version moved on")
	require.Equal(t, http.StatusBadRequest, postMutation(e, "not-a-uuid", body).Code)
}

// The board and the item page render the item, its title as text.
func TestTriagePagesRenderTheItemEscaped(t *testing.T) {
	t.Parallel()
	e, _, id := triageSetup(t)
	for _, path := range []string{"/triage", "/triage/items/" + strconv.FormatInt(id, 10)} {
		rec := get(e, path)
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.NotContains(t, rec.Body.String(), "<script>drift", path)
		doc, err := goquery.NewDocumentFromReader(rec.Body)
		require.NoError(t, err)
		require.Contains(t, doc.Find("[data-item-id]").Text(), "open", path)
		require.Equal(t, 1, doc.Find(`script[type="module"]`).Length(), "%s loads triage.js", path)
	}
}

// A dead-letter group's page shows its triage item's status and links it.
func TestDeadLetterGroupPageShowsItsTriageItem(t *testing.T) {
	t.Parallel()
	e, pool, _ := triageSetup(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id)
		VALUES ('fp-1', 1, now(), now(), 1)`)
	require.NoError(t, err)
	rec := get(e, "/dead-letters/fp-1")
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	summary := doc.Find("[data-testid=triage-summary]")
	require.Contains(t, summary.Text(), "open")
	href, _ := summary.Find("a").Attr("href")
	require.Regexp(t, `^/triage/items/\d+$`, href)
}

// The blocked aggregates list shows each aggregate's triage item.
func TestBlockedAggregatesShowTheirTriageItems(t *testing.T) {
	t.Parallel()
	e, pool, _ := triageSetup(t)
	_, err := pool.Exec(context.Background(), `
		INSERT INTO switchyard.destinations (name, kind, address) VALUES ('billing', 'function', 'billing');
		WITH dead AS (
			INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload, state, finished_at)
			VALUES ('t', 'billing', 'order', 'o-7', '{}', 'dead', now()) RETURNING id)
		INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		SELECT 'billing', 'order', 'o-7', id FROM dead`)
	require.NoError(t, err)
	rec := get(e, "/aggregates/blocked")
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	cell := doc.Find("[data-testid=blocked-triage]")
	require.Equal(t, 1, cell.Length())
	require.Contains(t, cell.Text(), "open")
	require.Contains(t, cell.Text(), "assigned to nobody")
}

// A parked inbound event's page shows its group's triage item.
func TestParkedInboxEventShowsItsTriageItem(t *testing.T) {
	t.Parallel()
	e, pool, _ := triageSetup(t)
	var id int64
	err := pool.QueryRow(context.Background(), `INSERT INTO switchyard.inbox_events
		(source, event_id, payload, status, attempts, last_error, error_fingerprint)
		VALUES ('shop', 'e-1', '{}', 'parked', 5, 'boom', 'fp-boom') RETURNING id`).Scan(&id)
	require.NoError(t, err)
	rec := get(e, "/inbox/events/"+strconv.FormatInt(id, 10))
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	require.Contains(t, doc.Find("[data-testid=triage-summary]").Text(), "open")
}
