package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/web/static"
)

// Signed-in pages stay out of every cache (Back after signing out shows
// nothing) and vary by cookie; hashed static assets keep their long cache.
func TestSignedInPagesAreNotCached(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	admin := b.login(t, auth.Admin)
	for _, path := range []string{"/", "/audit", "/messages", "/account"} {
		rec := b.request(http.MethodGet, path, admin, nil)
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.Equal(t, "no-store", rec.Header().Get("Cache-Control"), path)
		require.Equal(t, []string{"Cookie"}, rec.Header().Values("Vary"), path)
	}
	page := b.request(http.MethodGet, "/", admin, nil).Body.String()
	i := strings.Index(page, `href="/static/`)
	require.Positive(t, i)
	asset := page[i+len(`href="`):]
	asset = asset[:strings.IndexByte(asset, '"')]
	rec := b.request(http.MethodGet, asset, "", nil)
	require.Equal(t, http.StatusOK, rec.Code, asset)
	require.Contains(t, rec.Header().Get("Cache-Control"), "immutable")
}

// Every console route takes a body of its size only: forms a few KiB, the
// JSON API APIMaxBody, the inbox its own limit; multipart nowhere.
func TestRouteBodyLimits(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	send := func(path, contentType string, size int) int {
		body := strings.NewReader(strings.Repeat("a", size))
		req := httptest.NewRequest(http.MethodPost, path, body)
		req.RemoteAddr = "192.0.2.10:41000"
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Content-Type", contentType)
		req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: operator})
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		return rec.Code
	}
	form := "application/x-www-form-urlencoded"
	require.Equal(t, http.StatusRequestEntityTooLarge, send("/login", form, httpserver.FormMaxBody+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, send("/logout", form, httpserver.FormMaxBody+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, send("/api/replay-jobs", "application/json", console.APIMaxBody+1))
	require.Equal(t, http.StatusBadRequest, send("/api/replay-jobs", "application/json", 100<<10), "within the API's limit: read, and found wanting")
	require.Equal(t, http.StatusRequestEntityTooLarge, send("/inbox/shop", "application/json", console.DefaultInboxMaxBody+1))
	for _, path := range []string{"/login", "/logout", "/api/replay-jobs", "/inbox/shop"} {
		require.Equal(t, http.StatusUnsupportedMediaType, send(path, "multipart/form-data; boundary=x", 10), path)
	}
}

// A session's live streams are capped: the oldest closes first, told to
// wait before it reconnects; the newer ones stay open.
func TestLiveStreamsPerSessionAreCapped(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	listener := changefeed.NewListener(pool, changefeed.Config{})
	require.NoError(t, listener.Start(context.Background()))
	t.Cleanup(listener.Stop)
	guard := auth.NewStreamGuardWith(auth.StreamLimits{PerSession: 2, PerAccount: 10})
	hub := sse.New(listener, sse.Config{})
	b := setupAccess(t, false, hub, guard, pool)
	srv := httptest.NewServer(b.e)
	t.Cleanup(func() { hub.Close(); srv.Close() })

	viewer := b.login(t, auth.Viewer)
	var streams []chan string
	for range 3 {
		lines := openAuthStream(t, srv.URL, viewer)
		waitFor(t, lines, "event: ready", 10*time.Second)
		streams = append(streams, lines)
	}
	waitFor(t, streams[0], "retry: 60000", 5*time.Second)
	waitFor(t, streams[0], "event: streams_capped", 5*time.Second)
	deadline := time.After(5 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-streams[0]:
		case <-deadline:
			t.Fatal("the oldest stream is still open")
		}
	}
	require.Equal(t, 2, guard.Watched(), "the newer two are still watched")
}

// /metrics answers bearers of the token only, when one is set, and nobody
// when hidden (served elsewhere, or a console beyond loopback without a
// token).
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector())
	assets, err := static.New()
	require.NoError(t, err)
	for _, tc := range []struct {
		token         string
		hidden        bool
		authorization string
		want          int
	}{
		{"", false, "", http.StatusOK},
		{"", true, "", http.StatusNotFound},
		{"s3cret", false, "", http.StatusUnauthorized},
		{"s3cret", false, "Bearer wrong", http.StatusUnauthorized},
		{"s3cret", false, "Bearer ", http.StatusUnauthorized},
		{"s3cret", false, "s3cret", http.StatusUnauthorized},
		{"s3cret", false, "Bearer s3cret", http.StatusOK},
		{"s3cret", true, "Bearer s3cret", http.StatusNotFound},
	} {
		h := console.New(console.Deps{Assets: assets, Gatherer: registry, MetricsToken: tc.token, MetricsHidden: tc.hidden})
		e, err := httpserver.New(httpserver.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		h.Register(e)
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.authorization != "" {
			req.Header.Set("Authorization", tc.authorization)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		require.Equal(t, tc.want, rec.Code, "%+v", tc)
		if tc.want == http.StatusOK {
			require.Contains(t, rec.Body.String(), "go_goroutines")
		}
	}
}
