package httpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
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
	// Session returns the secret that identifies the request's session
	// (its cookie's token), or "" without one. A session's CSRF token is
	// derived from it: it changes at every sign-in and is worthless for
	// any other session. Requests without a session (the sign-in form)
	// use a random token kept in a cookie of its own. Nil: no sessions.
	Session func(c echo.Context) string
}

// csrfKey is the echo context key of the request's CSRF token.
const csrfKey = "csrf"

// CSRFHeader is the request header that carries the token (htmx sets it
// from the page's meta tag).
const CSRFHeader = "X-CSRF-Token"

// csrfFormField is the form field that carries the token (in the body;
// never the query string, which ends up in logs and Referer headers).
const csrfFormField = "_csrf"

// usingSecFetchSite is the context value of a request vouched for by the
// browser's Sec-Fetch-Site: it needs no token.
const usingSecFetchSite = "_sec_fetch_site"

var (
	errCSRFMissing = errors.New("csrf: no token in the X-CSRF-Token header or the _csrf form field")
	errCSRFWrong   = errors.New("csrf: the token is not this session's")
)

// csrf checks every unsafe method. Browsers that send Sec-Fetch-Site are
// judged by it, as echo's CSRF middleware does: same-origin (and none, a
// navigation the user typed) passes, same-site and cross-site are refused
// with 403. Other clients must send the session's token in the
// X-CSRF-Token header or the _csrf form field; an empty token never
// matches.
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
	tokens := csrfTokens{cookie: name, secure: cfg.Secure, session: cfg.Session}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if cfg.Exempt != nil && cfg.Exempt(c) {
				return next(c)
			}
			req := c.Request()
			safe := slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace}, req.Method)
			if site := req.Header.Get("Sec-Fetch-Site"); site != "" {
				// Same-site is refused too: a sibling subdomain can plant
				// cookies unless they are __Host-.
				if !safe && site != "same-origin" && site != "none" {
					return refuse(c, "sec_fetch_site", nil)
				}
				c.Set(csrfKey, usingSecFetchSite)
				return next(c)
			}
			want := tokens.expected(c)
			if !safe {
				got := req.Header.Get(CSRFHeader)
				if got == "" {
					got = req.PostFormValue(csrfFormField)
				}
				switch {
				case got == "":
					return refuse(c, "token", errCSRFMissing)
				case want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1:
					return refuse(c, "token", errCSRFWrong)
				}
			}
			c.Set(csrfKey, want)
			c.Response().Header().Add(echo.HeaderVary, echo.HeaderCookie)
			return next(c)
		}
	}
}

// csrfTokens finds the token a request must carry.
type csrfTokens struct {
	cookie  string // the pre-session token's cookie
	secure  bool
	session func(c echo.Context) string
}

// expected returns the request's token: derived from its session, or
// (without a session) the pre-session cookie's, set to a new random one
// when it has none. Signed in, a pre-session cookie is deleted: the token
// changes at sign-in.
func (t csrfTokens) expected(c echo.Context) string {
	if t.session != nil {
		if secret := t.session(c); secret != "" {
			if _, err := c.Cookie(t.cookie); err == nil {
				c.SetCookie(t.newCookie("", -1))
			}
			sum := sha256.Sum256([]byte("switchyard csrf v1\x00" + secret))
			return base64.RawURLEncoding.EncodeToString(sum[:])
		}
	}
	if k, err := c.Cookie(t.cookie); err == nil && len(k.Value) == csrfTokenLen {
		return k.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead)
	token := base64.RawURLEncoding.EncodeToString(b)
	c.SetCookie(t.newCookie(token, 24*60*60))
	return token
}

// csrfTokenLen is the length of every token (32 bytes, base64url).
const csrfTokenLen = 43

func (t csrfTokens) newCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: t.cookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: t.secure, SameSite: http.SameSiteStrictMode,
	}
}

// CSRFToken returns the request's CSRF token for forms and htmx, or ""
// when the browser's Sec-Fetch-Site header vouched for the request and no
// token is needed.
func CSRFToken(c echo.Context) string {
	t, _ := c.Get(csrfKey).(string)
	if t == usingSecFetchSite {
		return ""
	}
	return t
}
