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
	go func() { ran <- httpserver.Run(ctx, e, ln, 10*time.Second) }()

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
	select {
	case err := <-ran:
		t.Fatalf("Run returned while a request was in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status)
	require.NoError(t, <-ran)
}
