package httpserver

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// NonceKey is the echo context key holding the request's CSP nonce; the
// request's context carries it too, where templ.GetNonce finds it.
const NonceKey = "csp_nonce"

// securityHeaders sets the headers every response carries. The
// Content-Security-Policy allows only scripts that carry this request's
// nonce, styles and everything else from our own origin, and no framing:
// no 'unsafe-inline' and no 'unsafe-eval' anywhere.
//
// Answers on routes for programs (Config.ForPrograms: JSON, never a page)
// get programHeaders instead, without a nonce, whose making was a
// measurable share of every inbound event's CPU (BENCHMARKS.md, "The A/B
// of issues 10 and 15").
func securityHeaders(forPrograms func(c echo.Context) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if forPrograms != nil && forPrograms(c) {
				h := c.Response().Header()
				for name, values := range programHeaders {
					h[name] = values
				}
				return next(c)
			}
			return pageHeaders(c, next)
		}
	}
}

// pageHeaders sets the headers of an answer that may be a page, with this
// request's nonce, and calls next.
func pageHeaders(c echo.Context, next echo.HandlerFunc) error {
	nonce := newNonce()
	c.Set(NonceKey, nonce)
	req := c.Request()
	c.SetRequest(req.WithContext(templ.WithNonce(req.Context(), nonce)))
	h := c.Response().Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy(nonce))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	return next(c)
}

// programHeaders are the security headers of an answer to a program: a
// policy that allows nothing (no script, no frame), with the same
// hardening as pages otherwise. Each value is a slice of one, so that an
// Add to a response's copy allocates rather than writing into this one.
var programHeaders = http.Header{
	"Content-Security-Policy":    {"default-src 'none'; frame-ancestors 'none'"},
	"X-Content-Type-Options":     {"nosniff"},
	"X-Frame-Options":            {"DENY"},
	"Referrer-Policy":            {"same-origin"},
	"Cross-Origin-Opener-Policy": {"same-origin"},
}

// ContentSecurityPolicy returns the policy for a response whose scripts carry
// nonce.
func ContentSecurityPolicy(nonce string) string {
	return "default-src 'self'; " +
		"script-src 'nonce-" + nonce + "'; " +
		"style-src 'self'; " +
		"img-src 'self' data:; " +
		"connect-src 'self'; " +
		"object-src 'none'; " +
		"base-uri 'none'; " +
		"form-action 'self'; " +
		"frame-ancestors 'none'"
}

func newNonce() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead)
	return base64.StdEncoding.EncodeToString(b)
}
