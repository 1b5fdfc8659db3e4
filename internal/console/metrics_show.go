package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsShow serves GET /metrics on the console's address: nobody (404)
// when Deps.MetricsHidden, else MetricsHandler's answer. The counts include
// sign-in successes and failures as they happen: worth keeping from
// strangers.
func (h *Handler) metricsShow(c echo.Context) error {
	if h.deps.MetricsHidden {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	MetricsHandler(h.deps.Gatherer, h.deps.MetricsToken).ServeHTTP(c.Response(), c.Request())
	return nil
}

// MetricsHandler serves g's metrics in Prometheus's format: to anyone when
// token is "", else only to requests with Authorization: Bearer token
// (others get 401).
func MetricsHandler(g prometheus.Gatherer, token string) http.Handler {
	metrics := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	if token == "" {
		return metrics
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerIs(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Metrics need the metrics token (Authorization: Bearer).", http.StatusUnauthorized)
			return
		}
		metrics.ServeHTTP(w, r)
	})
}

// bearerIs reports whether r carries Authorization: Bearer token. The
// hashes are compared, in constant time, so that neither the token's
// content nor its length leaks through timing.
func bearerIs(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
