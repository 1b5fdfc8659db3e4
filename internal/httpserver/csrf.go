package httpserver

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// CSRFConfig turns on the CSRF check of every unsafe method.
type CSRFConfig struct {
	// Secure marks the token cookie Secure with the __Host- prefix (TLS).
	Secure bool
	// Exempt skips the check for a request (a machine endpoint with its
	// own authentication). Nil: none. It runs after routing: c.Path() is
	// the route.
	Exempt func(c echo.Context) bool
}

// csrfKey is the echo context key of the request's CSRF token.
const csrfKey = "csrf"

// CSRFHeader is the request header that carries the token (htmx sets it
// from the page's meta tag).
const CSRFHeader = "X-CSRF-Token"

// csrf is echo's CSRF middleware. Browsers that send Sec-Fetch-Site are
// judged by it: same-origin passes, same-site and cross-site are refused
// with 403. Other clients must echo the token from the cookie in the
// X-CSRF-Token header or the _csrf form field.
//
// A refusal is logged and counted (refused, by reason), not audited: the
// request carries no identity worth recording (a forged request carries
// its victim's cookie), and an audit row per refusal would let any page
// on the web write into the trail. The log and the metric show an attack
// or a broken client; the audit trail holds what signed-in people did.
func csrf(cfg CSRFConfig, logger *slog.Logger, refused *prometheus.CounterVec) echo.MiddlewareFunc {
	name := "switchyard_csrf"
	if cfg.Secure {
		name = "__Host-switchyard_csrf"
	}
	skip := middleware.DefaultSkipper
	if cfg.Exempt != nil {
		skip = cfg.Exempt
	}
	refusal := echo.NewHTTPError(http.StatusForbidden, "Refused: this request did not come from a page of this console. Reload the page and try again.")
	// Any web page can make its visitors' browsers send refused requests:
	// the counter takes them all, the log a sample (the first ten, then one
	// a minute), so that nobody can flood it.
	logSample := rate.Sometimes{First: 10, Interval: time.Minute}
	refuse := func(c echo.Context, reason string, err error) error {
		refused.WithLabelValues(reason).Inc()
		req := c.Request()
		logSample.Do(func() {
			logger.WarnContext(req.Context(), "csrf refused",
				slog.String("reason", reason), slog.String("http.method", req.Method), slog.String("http.path", req.URL.Path),
				slog.String("sec_fetch_site", req.Header.Get("Sec-Fetch-Site")), slog.String("remote_ip", c.RealIP()),
				slog.Any("error", err))
		})
		return refusal
	}
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		Skipper: skip,
		// A state-changing request that the browser says came from
		// another origin is refused, same-site ones too: echo would let a
		// same-site request through on a token matching the cookie, and a
		// sibling subdomain can plant that cookie unless it is __Host-.
		AllowSecFetchSiteFunc: func(c echo.Context) (bool, error) { return false, refuse(c, "sec_fetch_site", nil) },
		TokenLookup:           "header:" + CSRFHeader + ",form:_csrf",
		ContextKey:            csrfKey,
		CookieName:            name,
		CookiePath:            "/",
		CookieHTTPOnly:        true,
		CookieSecure:          cfg.Secure,
		CookieSameSite:        http.SameSiteStrictMode,
		ErrorHandler:          func(err error, c echo.Context) error { return refuse(c, "token", err) },
	})
}

// CSRFToken returns the request's CSRF token for forms and htmx, or ""
// when the browser's Sec-Fetch-Site header vouched for the request and no
// token is needed.
func CSRFToken(c echo.Context) string {
	t, _ := c.Get(csrfKey).(string)
	if t == middleware.CSRFUsingSecFetchSite {
		return ""
	}
	return t
}
