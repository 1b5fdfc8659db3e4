package httpserver_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/httpserver"
)

// A CSRF refusal is answered 403, logged once with why, and counted by
// reason; a request that passes is neither.
func TestCSRFRefusalsAreLoggedAndCounted(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	registry := prometheus.NewRegistry()
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: registry, CSRF: &httpserver.CSRFConfig{},
	})
	require.NoError(t, err)
	e.POST("/act", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	post := func(site string) int {
		req := httptest.NewRequest(http.MethodPost, "/act", nil)
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code
	}
	refusals := func() map[string]float64 {
		families, err := registry.Gather()
		require.NoError(t, err)
		got := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "switchyard_http_csrf_refused_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
		return got
	}

	require.Equal(t, http.StatusNoContent, post("same-origin"))
	require.Equal(t, http.StatusForbidden, post("cross-site"))
	require.Equal(t, http.StatusForbidden, post("same-site"))
	require.Equal(t, http.StatusForbidden, post("")) // no header, no token
	require.Equal(t, map[string]float64{"sec_fetch_site": 2, "token": 1}, refusals())
	require.Equal(t, 3, strings.Count(logs.String(), `msg="csrf refused"`))
	require.Contains(t, logs.String(), "sec_fetch_site=cross-site")
	require.Contains(t, logs.String(), "reason=token")

	// A page that makes its visitors send refused requests in a loop
	// cannot flood the log: all are counted, the first ten logged.
	for range 20 {
		require.Equal(t, http.StatusForbidden, post("cross-site"))
	}
	require.Equal(t, map[string]float64{"sec_fetch_site": 22, "token": 1}, refusals())
	require.Equal(t, 10, strings.Count(logs.String(), `msg="csrf refused"`))
}
