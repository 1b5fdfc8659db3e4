package httpserver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/httpserver"
)

// A request the browser abandoned is recorded as 499 (client closed) at
// info level and counted under 499, never as a 5xx; a query that ran out
// of time stays a server fault.
func TestAbandonedRequestIsClientClosedNotAServerFault(t *testing.T) {
	t.Parallel()
	registry := prometheus.NewRegistry()
	var logs bytes.Buffer
	e, err := httpserver.New(httpserver.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: registry})
	require.NoError(t, err)
	e.GET("/slow", func(c echo.Context) error {
		ctx := c.Request().Context()
		<-ctx.Done()
		return fmt.Errorf("list messages: %w", ctx.Err())
	})
	e.GET("/timeout", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 0)
		defer cancel()
		<-ctx.Done()
		return fmt.Errorf("list messages: %w", ctx.Err())
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the browser went away
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/slow", nil).WithContext(ctx))
	require.Contains(t, logs.String(), "level=INFO msg=\"http request\" http.method=GET http.path=/slow http.route=/slow http.status=499")
	require.NotContains(t, logs.String(), "level=ERROR")
	require.Equal(t, map[string]float64{"499": 1}, requestCodes(t, registry))

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/timeout", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Contains(t, logs.String(), `level=ERROR msg="request failed"`)
	require.Equal(t, map[string]float64{"499": 1, "500": 1}, requestCodes(t, registry))
}

// requestCodes sums switchyard_http_requests_total by code.
func requestCodes(t *testing.T, registry *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := registry.Gather()
	require.NoError(t, err)
	codes := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "switchyard_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					codes[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return codes
}
