package httpserver_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// The token belongs to the session: it is derived from the session's
// secret (another session's token is refused), it changes at sign-in (and
// the pre-session cookie goes), it is read from the X-CSRF-Token header or
// the _csrf form field only (never the query string), and an empty token
// never matches, whatever the cookie holds.
func TestCSRFTokenIsTheSessions(t *testing.T) {
	t.Parallel()
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		CSRF: &httpserver.CSRFConfig{Session: func(c echo.Context) string {
			if k, err := c.Cookie("sess"); err == nil {
				return k.Value
			}
			return ""
		}},
	})
	require.NoError(t, err)
	e.GET("/page", func(c echo.Context) error { return c.String(http.StatusOK, httpserver.CSRFToken(c)) })
	e.POST("/act", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	type token struct{ session, csrfCookie string }
	page := func(tk token) (string, *httptest.ResponseRecorder) {
		req := httptest.NewRequest(http.MethodGet, "/page", nil)
		if tk.session != "" {
			req.AddCookie(&http.Cookie{Name: "sess", Value: tk.session})
		}
		if tk.csrfCookie != "" {
			req.AddCookie(&http.Cookie{Name: "switchyard_csrf", Value: tk.csrfCookie})
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		return rec.Body.String(), rec
	}
	post := func(tk token, query, header, field string, sendEmptyCookie bool) int {
		form := url.Values{}
		if field != "" {
			form.Set("_csrf", field)
		}
		req := httptest.NewRequest(http.MethodPost, "/act"+query, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if header != "" {
			req.Header.Set(httpserver.CSRFHeader, header)
		}
		if tk.session != "" {
			req.AddCookie(&http.Cookie{Name: "sess", Value: tk.session})
		}
		if tk.csrfCookie != "" || sendEmptyCookie {
			req.Header.Add("Cookie", "switchyard_csrf="+tk.csrfCookie)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code
	}

	// Before sign-in: a random token in a cookie of its own.
	anon, rec := page(token{})
	require.Len(t, anon, 43)
	var preSession *http.Cookie
	for _, k := range rec.Result().Cookies() {
		if k.Name == "switchyard_csrf" {
			preSession = k
		}
	}
	require.NotNil(t, preSession)
	require.Equal(t, anon, preSession.Value)
	require.Equal(t, http.StatusNoContent, post(token{csrfCookie: anon}, "", "", anon, false))
	require.Equal(t, http.StatusForbidden, post(token{csrfCookie: anon}, "?_csrf="+anon, "", "", false), "never from the query string")
	require.Equal(t, http.StatusForbidden, post(token{}, "", "", "", true), "an empty cookie and an empty token")
	require.Equal(t, http.StatusForbidden, post(token{csrfCookie: "x"}, "", "x", "", false), "a token that is not one of ours")

	// Signed in: the token is the session's, and the old one is gone.
	alice, rec := page(token{session: "alice-secret", csrfCookie: anon})
	require.NotEqual(t, anon, alice, "rotated at sign-in")
	require.Contains(t, rec.Header().Values("Set-Cookie")[0], "switchyard_csrf=; Path=/; Max-Age=0")
	again, _ := page(token{session: "alice-secret"})
	require.Equal(t, alice, again, "stable for the session")
	require.Equal(t, http.StatusNoContent, post(token{session: "alice-secret"}, "", alice, "", false))
	require.Equal(t, http.StatusNoContent, post(token{session: "alice-secret"}, "", "", alice, false))
	require.Equal(t, http.StatusForbidden, post(token{session: "alice-secret", csrfCookie: anon}, "", anon, "", false), "the pre-session token is done")
	require.Equal(t, http.StatusForbidden, post(token{session: "bob-secret"}, "", alice, "", false), "another session's token")
	require.Equal(t, http.StatusForbidden, post(token{session: "alice-secret"}, "?_csrf="+alice, "", "", false))
}
