package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/internal/stats"
	"github.com/switchyard/switchyard/web/static"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type bundle struct {
	e        *echo.Echo
	migrator *migrate.Migrator
	pool     *pgxpool.Pool
}

// setup wires the console as cmd/console does, on a real database of the
// test's own.
func setup(t *testing.T) bundle {
	t.Helper()
	pool := dbtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := migrate.New(pool, logger)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	assets, err := static.New()
	require.NoError(t, err)
	registry := prometheus.NewRegistry()
	// Demo mode: these tests are about pages, not sign-in (access_test.go
	// is), and a loopback request is the demo admin.
	h := console.New(console.Deps{
		Logger: logger, Assets: assets, Gatherer: registry,
		Readiness: console.DatabaseReadiness{Pool: pool, Migrations: m},
		Auth:      testAuth(pool, auth.Config{}), AuditLog: audit.Log{DB: pool}, Demo: true,
		DB:    pool,
		Stats: stats.NewReader(pool, 0),
	})
	e, err := httpserver.New(httpserver.Config{Logger: logger, Registerer: registry, RenderError: h.RenderError, BodyLimit: h.BodyLimit, Streaming: console.Streaming, ForPrograms: console.ForPrograms})
	require.NoError(t, err)
	h.Register(e)
	return bundle{e: e, migrator: m, pool: pool}
}

func (b bundle) do(t *testing.T, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = "127.0.0.1:41000"
	b.e.ServeHTTP(rec, req)
	return rec
}

var wantNav = []string{"Dashboard", "Messages", "Dead letters", "Inbox", "Triage", "Reconciliation", "Audit"}

func TestEverySectionRendersWithNavigationAndEmptyState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ path, title string }{
		{"/", "Dashboard"}, {"/messages", "Messages"}, {"/dead-letters", "Dead letters"},
		{"/inbox", "Inbox"}, {"/reconciliation", "Reconciliation"}, {"/audit", "Audit"},
	} {
		t.Run(tc.title, func(t *testing.T) {
			rec := b.do(t, http.MethodGet, tc.path)
			require.Equal(t, http.StatusOK, rec.Code)
			require.Equal(t, "text/html; charset=UTF-8", rec.Header().Get("Content-Type"))
			doc, err := goquery.NewDocumentFromReader(rec.Body)
			require.NoError(t, err)
			require.Equal(t, tc.title+" · Switchyard", doc.Find("title").Text())
			require.Equal(t, tc.title, doc.Find("[data-testid=page-title]").Text())
			var labels []string
			doc.Find("[data-testid=nav] ul a").Each(func(_ int, s *goquery.Selection) { labels = append(labels, s.Text()) })
			require.Equal(t, wantNav, labels)
			current := doc.Find("[data-testid=nav] a[aria-current=page]")
			require.Equal(t, 1, current.Length())
			require.Equal(t, tc.title, current.Text())
			require.Equal(t, 1, doc.Find("[data-testid=empty-state]").Length())
		})
	}
}

// Every script must carry this response's nonce, and the policy must allow
// nothing inline and nothing evaluated.
func TestPagesCarryAStrictPolicyWithAFreshNonce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nonceRe := regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9+/=]+)'`)
	var nonces []string
	for range 2 {
		rec := b.do(t, http.MethodGet, "/")
		csp := rec.Header().Get("Content-Security-Policy")
		require.NotContains(t, csp, "unsafe-inline")
		require.NotContains(t, csp, "unsafe-eval")
		require.Contains(t, csp, "frame-ancestors 'none'")
		require.Contains(t, csp, "object-src 'none'")
		match := nonceRe.FindStringSubmatch(csp)
		require.Len(t, match, 2, csp)
		nonces = append(nonces, match[1])
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
		require.Equal(t, "same-origin", rec.Header().Get("Referrer-Policy"))

		doc, err := goquery.NewDocumentFromReader(rec.Body)
		require.NoError(t, err)
		scripts := doc.Find("script")
		require.Positive(t, scripts.Length())
		scripts.Each(func(_ int, s *goquery.Selection) {
			nonce, _ := s.Attr("nonce")
			require.Equal(t, match[1], nonce)
			src, ok := s.Attr("src")
			require.True(t, ok, "no inline scripts")
			require.Regexp(t, `^sha384-[A-Za-z0-9+/]+=*$`, s.AttrOr("integrity", ""), "pinned by subresource integrity")
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, src).Code, src)
		})
		doc.Find("link[rel=stylesheet]").Each(func(_ int, s *goquery.Selection) {
			href, _ := s.Attr("href")
			asset := b.do(t, http.MethodGet, href)
			require.Equal(t, http.StatusOK, asset.Code, href)
			require.Contains(t, asset.Header().Get("Cache-Control"), "immutable")
		})
		require.Zero(t, doc.Find("[style]").Length(), "no style attributes under the CSP")
	}
	require.NotEqual(t, nonces[0], nonces[1], "a nonce is never reused")
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz").Code)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/readyz").Code)

	require.NoError(t, b.migrator.Down(context.Background()))
	rec := b.do(t, http.MethodGet, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "not ready: database migrations pending\n", rec.Body.String(), "no hosts, users or paths for unauthenticated callers")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz").Code, "the process is still up")

	metrics := b.do(t, http.MethodGet, "/metrics")
	require.Equal(t, http.StatusOK, metrics.Code)
	require.Contains(t, metrics.Body.String(), `switchyard_http_requests_total{code="503",method="GET",route="/readyz"} 1`)
}

func TestUnknownPageIsAFriendly404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.do(t, http.MethodGet, "/no-such-page")
	require.Equal(t, http.StatusNotFound, rec.Code)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
	require.NoError(t, err)
	require.Equal(t, "Not Found", doc.Find("[data-testid=page-title]").Text())
	require.Equal(t, len(wantNav), doc.Find("[data-testid=nav] ul a").Length(), "the error page keeps the navigation")

	req := httptest.NewRequest(http.MethodGet, "/no-such-page", nil)
	req.Header.Set("Accept", "application/json")
	json := httptest.NewRecorder()
	b.e.ServeHTTP(json, req)
	require.Equal(t, http.StatusNotFound, json.Code)
	require.JSONEq(t, `{"error":"Not Found"}`, json.Body.String())
}
