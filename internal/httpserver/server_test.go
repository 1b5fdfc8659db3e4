package httpserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newServer(t *testing.T) (*echo.Echo, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	e, err := httpserver.New(httpserver.Config{
		Logger:     logger,
		Registerer: prometheus.NewRegistry(),
		RenderError: func(c echo.Context, status int, message string) error {
			return c.HTML(status, "<p>"+message+"</p>")
		},
	})
	require.NoError(t, err)
	return e, &logs
}

func TestPanicBecomesA500WithASafeMessageAndOneLog(t *testing.T) {
	t.Parallel()
	e, logs := newServer(t)
	e.GET("/boom", func(echo.Context) error { panic("secret internal detail") })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.NotContains(t, rec.Body.String(), "secret internal detail")
	require.Contains(t, rec.Body.String(), "Something went wrong")
	require.NotEmpty(t, rec.Header().Get("Content-Security-Policy"), "error pages carry the security headers too")
	require.Contains(t, logs.String(), "secret internal detail", "the cause is logged")
	require.Equal(t, 1, bytes.Count(logs.Bytes(), []byte(`msg="request failed"`)))
}

func TestHandlerErrorsKeepTheirStatusAndMessage(t *testing.T) {
	t.Parallel()
	e, _ := newServer(t)
	e.GET("/conflict", func(echo.Context) error {
		return echo.NewHTTPError(http.StatusConflict, "already replayed")
	})
	e.GET("/plain", func(echo.Context) error { return errors.New("db password is hunter2") })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/conflict", nil))
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, "<p>already replayed</p>", rec.Body.String())

	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/plain", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.JSONEq(t, `{"error":"Not Found"}`, rec.Body.String())

	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/plain", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.NotContains(t, rec.Body.String(), "hunter2")
}

// A request in flight when the shutdown starts still completes; Run returns
// nil once it has.
func TestRunDrainsRequestsInFlight(t *testing.T) {
	t.Parallel()
	e, _ := newServer(t)
	entered, release := make(chan struct{}), make(chan struct{})
	e.GET("/slow", func(c echo.Context) error {
		close(entered)
		<-release
		return c.String(http.StatusOK, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- httpserver.Run(ctx, e, ln, httpserver.ServeConfig{Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: 10 * time.Second})
	}()

	type result struct {
		status int
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		resp.Body.Close()
		got <- result{status: resp.StatusCode}
	}()
	<-entered
	cancel()
	// Shutdown has begun once the listener refuses new connections; the
	// request in flight must still be running then.
	testwait.Until(t, 10*time.Second, "the listener to close", func() bool {
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})
	select {
	case err := <-ran:
		t.Fatalf("Run returned while a request was in flight: %v", err)
	default:
	}
	close(release)
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status)
	require.NoError(t, <-ran)
}

func TestOnlyAllowedHostsAreAnswered(t *testing.T) {
	t.Parallel()
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		AllowedHosts: httpserver.LoopbackHosts,
	})
	require.NoError(t, err)
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })
	for host, want := range map[string]int{
		"127.0.0.1:8080": http.StatusOK, "localhost:8080": http.StatusOK, "[::1]:8080": http.StatusOK,
		"LOCALHOST": http.StatusOK, "attacker.example:8080": http.StatusMisdirectedRequest, "127.0.0.2": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, host)
	}
}

func TestMetricsLabelOnlyKnownMethodsAndClientIPIsThePeer(t *testing.T) {
	t.Parallel()
	registry := prometheus.NewRegistry()
	var logs bytes.Buffer
	e, err := httpserver.New(httpserver.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: registry})
	require.NoError(t, err)
	for _, m := range []string{"FOO1", "FOO2", http.MethodGet} {
		req := httptest.NewRequest(m, "/x", nil)
		req.Header.Set("X-Forwarded-For", "6.6.6.6")
		req.RemoteAddr = "192.0.2.1:1234"
		e.ServeHTTP(httptest.NewRecorder(), req)
	}
	families, err := registry.Gather()
	require.NoError(t, err)
	methods := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "switchyard_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" {
					methods[l.GetValue()] = true
				}
			}
		}
	}
	require.Equal(t, map[string]bool{"OTHER": true, "GET": true}, methods)
	require.Contains(t, logs.String(), "remote_ip=192.0.2.1")
	require.NotContains(t, logs.String(), "6.6.6.6")
}

// An error page that itself fails must still send the error status, never
// an empty 200.
func TestFailingErrorPageFallsBackToPlainText(t *testing.T) {
	t.Parallel()
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		RenderError: func(echo.Context, int, string) error { return errors.New("template broke") },
	})
	require.NoError(t, err)
	e.GET("/gone", func(echo.Context) error { return echo.NewHTTPError(http.StatusGone, "It is gone.") })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/gone", nil))
	require.Equal(t, http.StatusGone, rec.Code)
	require.Equal(t, "It is gone.\n", rec.Body.String())
}

// A route for programs gets a policy that allows nothing and no nonce; a
// page beside it keeps its nonce; both keep the other hardening headers,
// and a program's answer adding to one does not change the next answer's.
func TestProgramRoutesGetAPolicyThatAllowsNothing(t *testing.T) {
	t.Parallel()
	e, err := httpserver.New(httpserver.Config{
		Logger:      slog.New(slog.DiscardHandler),
		Registerer:  prometheus.NewRegistry(),
		ForPrograms: func(c echo.Context) bool { return c.Path() == "/hook/:name" },
	})
	require.NoError(t, err)
	e.POST("/hook/:name", func(c echo.Context) error {
		c.Response().Header().Add("X-Content-Type-Options", "extra")
		return c.JSONBlob(http.StatusOK, []byte(`{}`))
	})
	e.GET("/page", func(c echo.Context) error {
		nonce, _ := c.Get(httpserver.NonceKey).(string)
		return c.HTML(http.StatusOK, nonce)
	})
	for range 2 {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hook/a", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "default-src 'none'; frame-ancestors 'none'", rec.Header().Get("Content-Security-Policy"))
		require.Equal(t, []string{"nosniff", "extra"}, rec.Header().Values("X-Content-Type-Options"))
		require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"))
		require.Equal(t, "same-origin", rec.Header().Get("Referrer-Policy"))
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/page", nil))
	nonce := rec.Body.String()
	require.NotEmpty(t, nonce)
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'nonce-"+nonce+"'")
	require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
}
