package httpserver

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
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
// with 403. Other
// clients must echo the token from the cookie in the X-CSRF-Token header or
// the _csrf form field.
func csrf(cfg CSRFConfig) echo.MiddlewareFunc {
	name := "switchyard_csrf"
	if cfg.Secure {
		name = "__Host-switchyard_csrf"
	}
	skip := middleware.DefaultSkipper
	if cfg.Exempt != nil {
		skip = cfg.Exempt
	}
	refused := echo.NewHTTPError(http.StatusForbidden, "Refused: this request did not come from a page of this console. Reload the page and try again.")
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		Skipper: skip,
		// A state-changing request that the browser says came from
		// another origin is refused, same-site ones too: echo would let a
		// same-site request through on a token matching the cookie, and a
		// sibling subdomain can plant that cookie unless it is __Host-.
		AllowSecFetchSiteFunc: func(echo.Context) (bool, error) { return false, refused },
		TokenLookup:           "header:" + CSRFHeader + ",form:_csrf",
		ContextKey:            csrfKey,
		CookieName:            name,
		CookiePath:            "/",
		CookieHTTPOnly:        true,
		CookieSecure:          cfg.Secure,
		CookieSameSite:        http.SameSiteStrictMode,
		ErrorHandler:          func(error, echo.Context) error { return refused },
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
