package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsShow serves GET /metrics on the console's address: to anyone, to
// bearers of Deps.MetricsToken when it is set, to nobody (404) when
// Deps.MetricsHidden. The counts include sign-in successes and failures as
// they happen: worth keeping from strangers.
func (h *Handler) metricsShow(c echo.Context) error {
	switch {
	case h.deps.MetricsToken != "":
		if !bearerIs(c.Request(), h.deps.MetricsToken) {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "Metrics need the metrics token (Authorization: Bearer).")
		}
	case h.deps.MetricsHidden:
		return echo.NewHTTPError(http.StatusNotFound)
	}
	promhttp.HandlerFor(h.deps.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
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
