package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/web/static"
)

const password = "correct horse battery"

// testAuth is the tests' account service: auth.New with cheap argon2id
// parameters. At auth.DefaultParams every hash (the service's dummy, each
// account added, each sign-in) costs about a second of CPU under the race
// detector, and these tests add and sign in accounts by the hundred; what
// they check is who may do what, not the hash's cost (internal/auth tests
// that, at DefaultParams).
func testAuth(pool *pgxpool.Pool, cfg auth.Config) *auth.Service {
	cfg.Params = auth.Params{Time: 1, MemoryKiB: 1024, Threads: 1, KeyLen: 32}
	return auth.New(pool, cfg)
}

type accessBundle struct {
	e     *echo.Echo
	h     *console.Handler
	svc   *auth.Service
	pool  *pgxpool.Pool
	guard *auth.StreamGuard
}

// setupAccess wires the console as cmd/console does outside demo mode,
// with accounts admin, operator and viewer (each named for its role).
func setupAccess(t *testing.T, secure bool, events http.Handler, guard *auth.StreamGuard, pool *pgxpool.Pool) accessBundle {
	t.Helper()
	return setupAccessLogged(t, slog.New(slog.NewTextHandler(io.Discard, nil)), secure, events, guard, pool)
}

// setupAccessLogged is setupAccess logging to logger, with the handler's
// dependencies changed by tune.
func setupAccessLogged(t *testing.T, logger *slog.Logger, secure bool, events http.Handler, guard *auth.StreamGuard, pool *pgxpool.Pool, tune ...func(*console.Deps)) accessBundle {
	t.Helper()
	if pool == nil {
		pool = dbtest.New(t)
	}
	m, err := migrate.New(pool, logger)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	assets, err := static.New()
	require.NoError(t, err)
	registry := prometheus.NewRegistry()
	svc := testAuth(pool, auth.Config{Notify: func() { _ = changefeed.Notify(context.Background(), pool) }})
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		require.NoError(t, svc.AddUser(context.Background(), auth.CLI, r.String(), r, password))
	}
	deps := console.Deps{
		Logger: logger, Assets: assets, Gatherer: registry, Events: events,
		Readiness: console.DatabaseReadiness{Pool: pool, Migrations: m},
		Auth:      svc, Streams: guard, AuditLog: audit.Log{DB: pool}, SecureCookies: secure,
		DB: pool,
	}
	for _, f := range tune {
		f(&deps)
	}
	h := console.New(deps)
	e, err := httpserver.New(httpserver.Config{
		Logger: logger, Registerer: registry, RenderError: h.RenderError, BodyLimit: h.BodyLimit, Streaming: console.Streaming,
		CSRF: &httpserver.CSRFConfig{Secure: secure, Exempt: console.CSRFExempt, Session: h.SessionToken},
	})
	require.NoError(t, err)
	h.Register(e)
	return accessBundle{e: e, h: h, svc: svc, pool: pool, guard: guard}
}

func (b accessBundle) login(t *testing.T, role auth.Role) string {
	t.Helper()
	s, err := b.svc.Login(context.Background(), role.String(), password, "192.0.2.10")
	require.NoError(t, err)
	return s.Token
}

// request sends method path as a browser on another machine would:
// same-origin (Sec-Fetch-Site), asking for HTML, with the session token if
// any.
func (b accessBundle) request(method, path, token string, form url.Values) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	req.RemoteAddr = "192.0.2.10:41000"
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

var paramRe = regexp.MustCompile(`:[a-z_]+`)

// TestRouteTable walks every registered route, for anonymous and for every
// role, and checks the access layer's answer against the route's declared
// least role. A route registered without a role fails here.
func TestRouteTable(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	roles := b.h.RouteRoles()
	routes := b.e.Routes()
	require.NotEmpty(t, routes)
	tokens := map[auth.Role]string{}
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		tokens[r] = b.login(t, r)
	}
	require.Empty(t, undeclared(routes, roles), "routes without a declared role: add them to the route table")
	for _, rt := range routes {
		need := roles[rt.Method+" "+rt.Path]
		path := strings.ReplaceAll(paramRe.ReplaceAllString(rt.Path, "999999"), "*", "app.css")
		for _, who := range []auth.Role{auth.Public, auth.Viewer, auth.Operator, auth.Admin} {
			token := tokens[who]
			if rt.Method == http.MethodPost && rt.Path == "/logout" && who != auth.Public {
				token = b.login(t, who) // logging out ends the session: use one of its own
			}
			rec := b.request(rt.Method, path, token, url.Values{})
			status, location := rec.Code, rec.Header().Get("Location")
			toLogin := status == http.StatusSeeOther && strings.HasPrefix(location, "/login?next=")
			what := rt.Method + " " + rt.Path + " as " + who.String()
			switch {
			case need == auth.Public:
				require.NotEqual(t, http.StatusForbidden, status, what)
				require.False(t, toLogin, what)
			case who == auth.Public && rt.Method == http.MethodGet && rt.Path != "/events" && !strings.HasPrefix(rt.Path, "/api/"):
				require.True(t, toLogin, "%s: want a redirect to sign in, got %d %s", what, status, location)
			case who == auth.Public:
				require.Equal(t, http.StatusUnauthorized, status, what)
			case !who.Allows(need):
				require.Equal(t, http.StatusForbidden, status, what)
			default:
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, what)
				require.False(t, toLogin, what)
			}
		}
	}
}

// undeclared lists the registered routes the route table does not name.
func undeclared(routes []*echo.Route, roles map[string]auth.Role) []string {
	var missing []string
	for _, rt := range routes {
		if _, ok := roles[rt.Method+" "+rt.Path]; !ok {
			missing = append(missing, rt.Method+" "+rt.Path)
		}
	}
	return missing
}

// The route-table check can fail: a route registered outside the table
// (and so without a role) is reported.
func TestRouteOutsideTheTableIsReported(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	b.e.GET("/rogue", func(c echo.Context) error { return c.String(http.StatusOK, "no role checked") })
	require.Equal(t, []string{"GET /rogue"}, undeclared(b.e.Routes(), b.h.RouteRoles()))
}

func TestSignInRedirectsBackAndSetsASafeCookie(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	rec := b.request(http.MethodGet, "/messages?state=dead", "", nil)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/login?next=%2Fmessages%3Fstate%3Ddead", rec.Header().Get("Location"))

	rec = b.request(http.MethodPost, "/login", "", url.Values{"name": {"viewer"}, "password": {"wrong password!"}, "next": {"/messages"}})
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "Wrong name or password.")
	require.NotContains(t, rec.Body.String(), "wrong password!")

	rec = b.request(http.MethodPost, "/login", "", url.Values{"name": {"viewer"}, "password": {password}, "next": {"//evil.example/"}})
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/", rec.Header().Get("Location"), "never an open redirect")
	cookie := sessionCookieOf(t, rec, "switchyard_session")
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, cookie.SameSite)
	require.False(t, cookie.Secure)

	// Signing in again with the old cookie rotates: the old session ends.
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"name": {"viewer"}, "password": {password}, "next": {"/inbox"}}.Encode()))
	req.RemoteAddr = "192.0.2.10:41000"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(cookie)
	rotated := httptest.NewRecorder()
	b.e.ServeHTTP(rotated, req)
	require.Equal(t, http.StatusSeeOther, rotated.Code)
	require.Equal(t, "/inbox", rotated.Header().Get("Location"))
	fresh := sessionCookieOf(t, rotated, "switchyard_session")
	require.NotEqual(t, cookie.Value, fresh.Value)
	_, err := b.svc.Authenticate(context.Background(), cookie.Value)
	require.ErrorIs(t, err, auth.ErrNoSession)

	page := b.request(http.MethodGet, "/", fresh.Value, nil)
	require.Equal(t, http.StatusOK, page.Code)
	require.Contains(t, page.Body.String(), `data-testid="user-name">viewer<`)
	require.NotContains(t, page.Body.String(), `data-testid="nav-audit"`, "viewers do not see the Audit link")

	out := b.request(http.MethodPost, "/logout", fresh.Value, url.Values{})
	require.Equal(t, http.StatusSeeOther, out.Code)
	require.Equal(t, "/login", out.Header().Get("Location"))
	_, err = b.svc.Authenticate(context.Background(), fresh.Value)
	require.ErrorIs(t, err, auth.ErrNoSession)
}

func TestSecureCookiesUseTheHostPrefix(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, true, nil, nil, nil)
	rec := b.request(http.MethodPost, "/login", "", url.Values{"name": {"admin"}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, rec.Code)
	cookie := sessionCookieOf(t, rec, "__Host-switchyard_session")
	require.True(t, cookie.Secure)
	require.Equal(t, "/", cookie.Path)
	require.Empty(t, cookie.Domain)
}

// An unsafe request with a valid session cookie from another site is
// refused, and so is one from a client that proves nothing; the page's
// token lets a client without Sec-Fetch-Site through. The webhook receiver
// is exempt.
func TestCSRFRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	token := b.login(t, auth.Admin)
	post := func(site, csrfCookie, csrfField string) int {
		form := url.Values{}
		if csrfField != "" {
			form.Set("_csrf", csrfField)
		}
		path := "/logout"
		if strings.HasPrefix(csrfField, "?") {
			path, form = path+csrfField, url.Values{}
		}
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
		req.RemoteAddr = "192.0.2.10:41000"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
		if csrfCookie != "" {
			req.AddCookie(&http.Cookie{Name: "switchyard_csrf", Value: csrfCookie})
		}
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusForbidden, post("cross-site", "", ""))
	// A sibling subdomain can plant the token cookie when it is not
	// __Host-: same-site requests are refused even with a matching token.
	require.Equal(t, http.StatusForbidden, post("same-site", "planted", "planted"))
	require.Equal(t, http.StatusForbidden, post("", "", ""))
	require.Equal(t, http.StatusForbidden, post("", "a-token", "another-token"))
	_, err := b.svc.Authenticate(context.Background(), token)
	require.NoError(t, err, "refused requests changed nothing")

	// A client without Sec-Fetch-Site gets the session's token in the
	// page (no cookie: it is derived from the session).
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.10:41000"
	req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
	page := httptest.NewRecorder()
	b.e.ServeHTTP(page, req)
	require.Equal(t, http.StatusOK, page.Code)
	csrf := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)"`).FindStringSubmatch(page.Body.String())
	require.Len(t, csrf, 2)
	require.Equal(t, http.StatusForbidden, post("", "", "?_csrf="+csrf[1]), "the query string is no place for it")
	require.Equal(t, http.StatusSeeOther, post("", "", csrf[1]))

	inbox := httptest.NewRequest(http.MethodPost, "/inbox/shop", strings.NewReader("{}"))
	inbox.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, inbox)
	require.Equal(t, http.StatusNotFound, rec.Code, "the receiver answers (unknown source), not the CSRF check")
}

func TestAuditPageListsSignInsForAdminsOnly(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	admin := b.login(t, auth.Admin)
	_, err := b.svc.Login(context.Background(), "viewer", "wrong password!", "192.0.2.11")
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)
	require.Equal(t, http.StatusForbidden, b.request(http.MethodGet, "/audit", b.login(t, auth.Viewer), nil).Code)

	rec := b.request(http.MethodGet, "/audit?action=login", admin, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	require.Equal(t, 3, strings.Count(body, `data-testid="audit-row"`), "two sign-ins and one failure")
	require.Contains(t, body, "failed")
	require.Contains(t, body, `sse-connect="/events?kind=audit"`)
	require.Equal(t, http.StatusBadRequest, b.request(http.MethodGet, "/audit?before=x", admin, nil).Code)
}

func sessionCookieOf(t *testing.T, rec *httptest.ResponseRecorder, name string) *http.Cookie {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", name, rec.Result().Header["Set-Cookie"])
	return nil
}

// Revoking a session closes its open stream, with a session_ended event,
// within 2 s; another session's stream stays open.
func TestRevokedSessionsStreamEndsWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	listener := changefeed.NewListener(pool, changefeed.Config{})
	require.NoError(t, listener.Start(context.Background()))
	t.Cleanup(listener.Stop)
	guard := auth.NewStreamGuard()
	_, unwatch := listener.Subscribe(guard.Observe)
	t.Cleanup(unwatch)
	hub := sse.New(listener, sse.Config{})
	b := setupAccess(t, false, hub, guard, pool)
	srv := httptest.NewServer(b.e)
	t.Cleanup(func() { hub.Close(); srv.Close() })

	mine, other := b.login(t, auth.Viewer), b.login(t, auth.Operator)
	anonymous, err := http.Get(srv.URL + "/events")
	require.NoError(t, err)
	anonymous.Body.Close()
	require.Equal(t, http.StatusUnauthorized, anonymous.StatusCode)

	lines := openAuthStream(t, srv.URL, mine)
	otherLines := openAuthStream(t, srv.URL, other)
	waitFor(t, lines, "event: ready", 10*time.Second)
	waitFor(t, otherLines, "event: ready", 10*time.Second)

	p, err := b.svc.Authenticate(context.Background(), mine)
	require.NoError(t, err)
	require.NoError(t, b.svc.RevokeSession(context.Background(), auth.Principal{Name: "admin"}, p.SessionID, ""))
	waitFor(t, lines, "event: session_ended", 2*time.Second)
	deadline := time.After(2 * time.Second)
	for {
		select {
		case _, open := <-lines:
			if !open {
				require.Equal(t, 1, guard.Watched(), "only the other stream is still watched")
				return
			}
		case <-deadline:
			t.Fatal("the revoked session's stream is still open")
		}
	}
}

// openAuthStream opens /events with a session and returns its lines; the
// channel closes when the stream ends.
func openAuthStream(t *testing.T, base, token string) chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		resp.Body.Close()
		client.CloseIdleConnections()
	})
	return lines
}

func waitFor(t *testing.T, lines chan string, want string, limit time.Duration) {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case line, open := <-lines:
			require.True(t, open, "stream ended before %q", want)
			if line == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within %v", want, limit)
		}
	}
}

// Changing one's password ends every session of the account, this
// browser's gets a fresh one, and the old password stops working.
func TestChangeOwnPassword(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	mine, elsewhere := b.login(t, auth.Operator), b.login(t, auth.Operator)
	form := func(current, next, again string) url.Values {
		return url.Values{"current_password": {current}, "new_password": {next}, "new_password_again": {again}}
	}
	const next = "a brand new password"
	require.Equal(t, http.StatusUnauthorized, b.request(http.MethodPost, "/account/password", mine, form("wrong password!", next, next)).Code)
	require.Equal(t, http.StatusBadRequest, b.request(http.MethodPost, "/account/password", mine, form(password, next, next+"x")).Code)
	require.Equal(t, http.StatusBadRequest, b.request(http.MethodPost, "/account/password", mine, form(password, "short", "short")).Code)

	rec := b.request(http.MethodPost, "/account/password", mine, form(password, next, next))
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/account?changed=1", rec.Header().Get("Location"))
	fresh := sessionCookieOf(t, rec, "switchyard_session")
	for _, old := range []string{mine, elsewhere} {
		_, err := b.svc.Authenticate(context.Background(), old)
		require.ErrorIs(t, err, auth.ErrNoSession)
	}
	page := b.request(http.MethodGet, "/account?changed=1", fresh.Value, nil)
	require.Equal(t, http.StatusOK, page.Code)
	require.Contains(t, page.Body.String(), `data-testid="password-changed"`)
	_, err := b.svc.Login(context.Background(), "operator", password, "192.0.2.12")
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)
	_, err = b.svc.Login(context.Background(), "operator", next, "192.0.2.12")
	require.NoError(t, err)
}

// Viewers see no payloads unless the console allows it: the detail page
// shows a notice instead, and the raw download is refused.
func TestViewersSeePayloadsRedacted(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	var id int64
	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.destinations (name, kind) VALUES ('d', 'function')`)
	require.NoError(t, err)
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'd', '{"card": "4111-secret"}') RETURNING id`).Scan(&id))
	page := fmt.Sprintf("/messages/%d", id)
	viewer, operator := b.login(t, auth.Viewer), b.login(t, auth.Operator)

	rec := b.request(http.MethodGet, page, viewer, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotContains(t, rec.Body.String(), "4111-secret")
	require.Contains(t, rec.Body.String(), "payload hidden")
	require.Equal(t, http.StatusForbidden, b.request(http.MethodGet, page+"/payload", viewer, nil).Code)

	rec = b.request(http.MethodGet, page, operator, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "4111-secret")
	require.Equal(t, http.StatusOK, b.request(http.MethodGet, page+"/payload", operator, nil).Code)

	// Inbound events too: body and headers.
	var event int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO switchyard.inbox_events (source, event_id, payload, headers, status)
		VALUES ('shop', 'e1', '{"card": "4111-inbound"}', '{"x-api-key": "key-inbound"}', 'processed') RETURNING id`).Scan(&event))
	eventPage := fmt.Sprintf("/inbox/events/%d", event)
	rec = b.request(http.MethodGet, eventPage, viewer, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotContains(t, rec.Body.String(), "4111-inbound")
	require.NotContains(t, rec.Body.String(), "key-inbound")
	rec = b.request(http.MethodGet, eventPage, operator, nil)
	require.Contains(t, rec.Body.String(), "4111-inbound")
}

// A live region whose session ended sends the whole page to the sign-in
// form with the page to come back to, as the stream's session_ended does;
// only the path and query of the browser's address are kept.
func TestExpiredLiveRegionRedirectsToSignInWithNext(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	for current, want := range map[string]string{
		"http://127.0.0.1:8080/audit?actor=ada": "/login?next=%2Faudit%3Factor%3Dada",
		"":                                      "/login",
		"not a url\x7f":                         "/login",
	} {
		req := httptest.NewRequest(http.MethodGet, "/audit", nil)
		req.RemoteAddr = "192.0.2.10:41000"
		req.Header.Set("HX-Request", "true")
		if current != "" {
			req.Header.Set("HX-Current-URL", current)
		}
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.Equal(t, want, rec.Header().Get("HX-Redirect"), current)
	}
}
