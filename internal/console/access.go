package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/idempotency"
	"github.com/switchyard/switchyard/web/templates"
)

// principalKey is the echo context key of the request's auth.Principal.
const principalKey = "principal"

// Session cookie names: with Secure cookies, the __Host- prefix makes the
// browser refuse the cookie unless it is Secure, host-only and Path=/.
const (
	sessionCookie       = "switchyard_session"
	secureSessionCookie = "__Host-switchyard_session"
)

func (h *Handler) cookieName() string {
	if h.deps.SecureCookies {
		return secureSessionCookie
	}
	return sessionCookie
}

// require wraps a route's handler with the check of its least role. A
// request without a session is sent to the sign-in page (pages) or gets
// 401 (streams, htmx and JSON requests); one whose role is too low gets
// 403.
func (h *Handler) require(need auth.Role, next echo.HandlerFunc) echo.HandlerFunc {
	if need == auth.Public {
		return next
	}
	return func(c echo.Context) error {
		p, err := h.principal(c)
		if errors.Is(err, auth.ErrNoSession) {
			return h.unauthenticated(c)
		}
		if err != nil {
			return err
		}
		// What a signed-in person sees stays theirs: no cache keeps it
		// (Back after signing out shows nothing), and no shared cache
		// hands it to another cookie.
		hdr := c.Response().Header()
		hdr.Set("Cache-Control", "no-store")
		if !slices.Contains(hdr.Values("Vary"), "Cookie") { // the CSRF check may have said so
			hdr.Add("Vary", "Cookie")
		}
		// The page knows who is looking before the role check, so that a
		// 403 too is framed with their own navigation and user menu. It
		// grants nothing: handlers act as current(c), set below.
		req := c.Request()
		v := templates.Viewer{Name: p.Name, Role: p.Role.String(), Admin: p.Role.Allows(auth.Admin),
			Demo: p.SessionID == 0, DemoPanel: h.deps.DemoPanel != nil && p.Role.Allows(auth.Operator), CSRFToken: httpserver.CSRFToken(c)}
		c.SetRequest(req.WithContext(templates.WithViewer(req.Context(), v)))
		if !p.Role.Allows(need) {
			return h.forbidden(c, p, need, fmt.Sprintf("Your role (%s) may not use this; it needs %s.", p.Role, need))
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// forbidden answers 403 (with msg) to p, signed in but whose role is below
// need, and records the refusal in the audit trail: who tried what they
// may not do is worth knowing (auth.Service.RecordDenied bounds how often
// one session is recorded). A failure to record is logged; the refusal
// stands either way.
func (h *Handler) forbidden(c echo.Context, p auth.Principal, need auth.Role, msg string) error {
	req := c.Request()
	// The escaped path: a decoded one may hold a NUL or invalid UTF-8,
	// which the database refuses, and the refusal would go unrecorded.
	d := auth.Denial{Target: req.Method + " " + req.URL.EscapedPath(), Route: c.Path(), Need: need, RemoteAddr: c.RealIP()}
	if key, err := uuid.Parse(req.Header.Get(idempotency.Header)); err == nil {
		d.RequestID = key.String() // only a well-formed id goes into the trail
	}
	if _, err := h.deps.Auth.RecordDenied(req.Context(), p, d); err != nil {
		h.deps.Logger.ErrorContext(req.Context(), "record a refused request", slog.String("user", p.Name), slog.Any("error", err))
	}
	return echo.NewHTTPError(http.StatusForbidden, msg)
}

// principal resolves the request's session. In demo mode a loopback peer
// without a session is the demo admin.
func (h *Handler) principal(c echo.Context) (auth.Principal, error) {
	if cookie, err := c.Cookie(h.cookieName()); err == nil {
		p, err := h.deps.Auth.Authenticate(c.Request().Context(), cookie.Value)
		if !errors.Is(err, auth.ErrNoSession) {
			return p, err
		}
	}
	if h.deps.Demo && isLoopback(c.RealIP()) {
		return auth.DemoAdmin, nil
	}
	return auth.Principal{}, auth.ErrNoSession
}

// current returns the principal require put in c.
func current(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

func (h *Handler) unauthenticated(c echo.Context) error {
	req := c.Request()
	page := req.Method == http.MethodGet && req.Header.Get("HX-Request") == "" && c.Path() != "/events" &&
		!strings.HasPrefix(req.URL.Path, "/api/") && !strings.Contains(req.Header.Get("Accept"), "application/json")
	if page {
		return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(req.URL.RequestURI()))
	}
	// htmx follows HX-Redirect whatever the status: a live region whose
	// session ended takes the whole page to the sign-in form, which brings
	// the reader back to that page (HX-Current-URL, the browser's address)
	// after signing in, as the stream's session_ended does. Only its path
	// and query are kept; the form checks next like any other.
	c.Response().Header().Set("HX-Redirect", signInFrom(req.Header.Get("HX-Current-URL")))
	return echo.NewHTTPError(http.StatusUnauthorized, "Sign in first.")
}

// signInFrom is the sign-in form's address for a reader on page (an
// absolute URL or empty).
func signInFrom(page string) string {
	u, err := url.Parse(page)
	if page == "" || err != nil || u.Path == "" || !strings.HasPrefix(u.Path, "/") {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(u.RequestURI())
}

func isLoopback(ip string) bool {
	parsed := net.ParseIP(ip)
	return parsed != nil && parsed.IsLoopback()
}

// safeNext returns next if it is a path on this site, else "/": the
// sign-in form must not become an open redirect.
func safeNext(next string) string {
	// Browsers drop tabs and newlines from URLs and read a backslash as a
	// slash, so "/\t/evil.example" would become "//evil.example": refuse
	// any of them outright, then anything that is not a plain local path.
	if strings.ContainsAny(next, "\\\t\r\n") || strings.ContainsFunc(next, unicode.IsControl) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") ||
		strings.HasPrefix(next, "//") || strings.HasPrefix(u.Path, "/login") {
		return "/"
	}
	return next
}

// PayloadVisible reports whether the request's principal may see message
// payloads: operators and admins always, viewers only when the console is
// configured so (--viewer-payloads). Page handlers call it and show
// RedactedPayload otherwise.
func (h *Handler) PayloadVisible(c echo.Context) bool {
	return h.deps.ViewerPayloads || current(c).Role.Allows(auth.Operator)
}

// RedactedPayload is shown in place of a payload the viewer may not see.
const RedactedPayload = "(payload hidden: viewers see payloads only when the console runs with --viewer-payloads)"

// SessionToken is httpserver.CSRFConfig.Session: the session cookie's
// token, from which the CSRF token is derived ("" without one). It is not
// checked here: a request with a dead session fails its role check anyway.
func (h *Handler) SessionToken(c echo.Context) string {
	if cookie, err := c.Cookie(h.cookieName()); err == nil {
		return cookie.Value
	}
	return ""
}
