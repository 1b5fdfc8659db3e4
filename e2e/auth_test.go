package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

const e2ePassword = "correct horse battery"

// withAccounts is a console outside demo mode with one account per role,
// each named for its role, and the service that made them (on the same
// database) for the test to act as another instance would.
type withAccounts struct {
	*consoletest.Process
	svc  *auth.Service
	pool *pgxpool.Pool
}

// startConsoleWithAccounts starts the console binary without demo mode:
// every page needs a session.
// e2eAuth is the tests' account service: auth.New with cheap argon2id
// parameters. At auth.DefaultParams every hash (each account added, each
// sign-in from the test) costs about a second of CPU in this race-detected
// test process, and the suite adds accounts by the dozen; the console
// verifies a hash with the parameters recorded in it. What these tests
// check is the pages, not the hash's cost (internal/auth tests that).
func e2eAuth(pool *pgxpool.Pool, cfg auth.Config) *auth.Service {
	cfg.Params = auth.Params{Time: 1, MemoryKiB: 1024, Threads: 1, KeyLen: 32}
	return auth.New(pool, cfg)
}

func startConsoleWithAccounts(t *testing.T) withAccounts {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The console migrates the database; the accounts come after.
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL})
	t.Cleanup(func() { p.Stop(t) })
	svc := e2eAuth(pool, auth.Config{Notify: func() { _ = changefeed.Notify(context.Background(), pool) }})
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		require.NoError(t, svc.AddUser(context.Background(), auth.CLI, r.String(), r, e2ePassword))
	}
	return withAccounts{Process: p, svc: svc, pool: pool}
}

// newPageExpecting is newPage for pages that answer an error status on
// purpose (401 for a wrong password, 403 for a forbidden page): Chromium
// logs those responses as console errors, which are expected here and
// only here. Everything else still fails the test.
func newPageExpecting(t *testing.T, baseURL string, statuses ...string) playwright.Page {
	t.Helper()
	return newPageTolerating(t, baseURL, func(p string) bool {
		for _, s := range statuses {
			if strings.Contains(p, "the server responded with a status of "+s) {
				return true
			}
		}
		return false
	})
}

func signIn(t *testing.T, page playwright.Page, name, password string) {
	t.Helper()
	require.NoError(t, page.GetByTestId("login-name").Fill(name))
	require.NoError(t, page.GetByTestId("login-password").Fill(password))
	require.NoError(t, page.GetByTestId("login-submit").Click())
}

// Every page sends an anonymous visitor to the sign-in form; signing in
// returns there; signing out ends the session.
func TestSignInAndSignOut(t *testing.T) {
	t.Parallel()
	console := startConsoleWithAccounts(t)
	page := newPageExpecting(t, console.URL, "401")
	expect := newExpect()

	_, err := page.Goto("/messages")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/login?next=%2Fmessages"))
	require.NoError(t, expect.Page(page).ToHaveTitle("Sign in · Switchyard"))
	screenshot(t, page, "login")

	signIn(t, page, "operator", "not the password")
	require.NoError(t, expect.Locator(page.GetByTestId("login-error")).ToHaveText("Wrong name or password."))
	require.NoError(t, expect.Locator(page.GetByTestId("login-name")).ToHaveValue("operator"))
	require.NoError(t, expect.Locator(page.GetByTestId("login-password")).ToHaveValue(""))
	screenshot(t, page, "login-failed")

	signIn(t, page, "operator", e2ePassword)
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/messages"))
	require.NoError(t, expect.Locator(page.GetByTestId("user-name")).ToHaveText("operator"))
	require.NoError(t, expect.Locator(page.GetByTestId("user-role")).ToHaveText("operator"))
	require.NoError(t, expect.Locator(page.GetByTestId("nav-audit")).ToHaveCount(0), "Audit is for admins")
	require.NoError(t, expect.Locator(page.GetByTestId("demo-banner")).ToHaveCount(0))

	require.NoError(t, page.GetByTestId("user-account").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/account"))
	require.NoError(t, expect.Locator(page.GetByTestId("password-form")).ToBeVisible())
	screenshot(t, page, "account")

	require.NoError(t, page.GetByTestId("logout").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/login"))
	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/login\?next=`)), "the session is over")
}

// A viewer opening an admin's page gets the 403 page, in the viewer's own
// frame (their user menu, their navigation), which works at every width
// (the layout checks of TestEveryPageAtEveryWidth, the navigation folded
// on a phone).
func TestViewerIsForbiddenFromAdminPages(t *testing.T) {
	t.Parallel()
	console := startConsoleWithAccounts(t)
	page := newPageExpecting(t, console.URL, "403")
	expect := newExpect()
	_, err := page.Goto("/login")
	require.NoError(t, err)
	signIn(t, page, "viewer", e2ePassword)
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/"))
	for _, w := range widths {
		require.NoError(t, page.SetViewportSize(w.width, w.height))
		for _, path := range []string{"/audit", "/sessions"} {
			resp, err := page.Goto(path)
			require.NoError(t, err)
			require.Equal(t, 403, resp.Status(), path)
			require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText("Forbidden"))
			require.NoError(t, expect.Locator(page.GetByTestId("error")).ToContainText("Your role (viewer) may not use this; it needs admin."))
			// The frame is still the viewer's: their name and Sign out,
			// and no link to the admin's pages they were refused.
			require.NoError(t, expect.Locator(page.GetByTestId("user-name")).ToHaveText("viewer"))
			require.NoError(t, expect.Locator(page.GetByTestId("logout")).ToHaveCount(1))
			require.NoError(t, expect.Locator(page.GetByTestId("nav-audit")).ToHaveCount(0))
			requireLayout(t, page, path, w.width)
			navOpen := ""
			if w.collapsed && path == "/audit" {
				navOpen = "forbidden-390-nav-open"
			}
			checkNavigation(t, page, w.collapsed, path, navOpen)
		}
		screenshot(t, page, "forbidden-"+w.name)
	}
}

// An admin watches the live Audit page; a sign-in elsewhere appears on it.
// Revoking the admin's session from another instance closes the page's
// stream, and the page goes to the sign-in form within 2 s.
func TestRevokedSessionLeavesTheLivePageForSignIn(t *testing.T) {
	t.Parallel()
	console := startConsoleWithAccounts(t)
	// The revoke is audited, so the live audit list may ask for its region
	// just as the session ends: that request's 401 (whose HX-Redirect also
	// leads to the sign-in form) is expected.
	page := newPageTolerating(t, console.URL, func(p string) bool {
		return strings.Contains(p, "status of 401 (Unauthorized) ("+console.URL+"/audit")
	})
	expect := newExpect()
	_, err := page.Goto("/audit")
	require.NoError(t, err)
	signIn(t, page, "admin", e2ePassword)
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/audit"))
	_, err = page.Goto("/sessions")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("session-row")).ToHaveCount(1))
	screenshot(t, page, "sessions")
	_, err = page.Goto("/audit")
	require.NoError(t, err)
	rows := page.GetByTestId("audit-row")
	require.NoError(t, expect.Locator(rows.First()).ToContainText("login"))
	count, err := rows.Count()
	require.NoError(t, err)

	// The page is live: another sign-in appears without a reload.
	_, err = console.svc.Login(context.Background(), "viewer", e2ePassword, "192.0.2.50")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(rows).ToHaveCount(count+1))
	require.NoError(t, expect.Locator(rows.First()).ToContainText("192.0.2.50"))
	screenshot(t, page, "audit")
	secondChangeDuringARefresh(t, console, page, count+1)

	sessions, err := console.svc.Sessions(context.Background(), 10)
	require.NoError(t, err)
	var admin auth.LiveSession
	for _, s := range sessions {
		if s.User == "admin" {
			admin = s
		}
	}
	require.NotZero(t, admin.ID)
	require.NoError(t, console.svc.RevokeSession(context.Background(), auth.CLI, admin.ID, ""))
	// The stream itself ends within 2 s (TestRevokedSessionsStreamEndsWithinTwoSeconds
	// in internal/console); here the page must then reach the sign-in
	// form, which under the whole parallel suite took a little longer.
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/login\?next=%2Faudit$`)))
	require.NoError(t, expect.Locator(page.GetByTestId("login-form")).ToBeVisible())
}

func TestDemoModeShowsItsBanner(t *testing.T) {
	t.Parallel()
	console := startConsole(t)
	page := newPage(t, console.URL)
	expect := newExpect()
	_, err := page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.GetByTestId("demo-banner")).ToContainText("Demo mode"))
	require.NoError(t, expect.Locator(page.GetByTestId("user-name")).ToHaveText("demo"))
	require.NoError(t, expect.Locator(page.GetByTestId("logout")).ToHaveCount(0), "demo mode has no session to end")
	screenshot(t, page, "demo")
}

// secondChangeDuringARefresh signs in twice elsewhere, the second time
// while the Audit page's refresh for the first is held in flight: the
// refresh the second change queues must run too, and the list show both
// (it once did not: the region replaced its own element, and htmx drops
// what was queued on a removed element; TestLiveRegionsKeepTheirElement).
func secondChangeDuringARefresh(t *testing.T, console withAccounts, page playwright.Page, rowsBefore int) {
	t.Helper()
	refresh := holdAnswer(t, page, `^/audit$`)
	_, err := page.Evaluate(`() => { window.auditEvents = 0; document.body.addEventListener("htmx:sseMessage", () => window.auditEvents++) }`)
	require.NoError(t, err)

	_, err = console.svc.Login(context.Background(), "viewer", e2ePassword, "192.0.2.51")
	require.NoError(t, err)
	refresh.arrived(t)
	_, err = console.svc.Login(context.Background(), "viewer", e2ePassword, "192.0.2.52")
	require.NoError(t, err)
	testwait.Until(t, expectTimeout*time.Millisecond, "both changes reached the page", func() bool {
		n, err := page.Evaluate(`() => window.auditEvents`)
		require.NoError(t, err)
		events, ok := n.(int)
		return ok && events >= 2
	})
	refresh.release(t)
	rows := page.GetByTestId("audit-row")
	expect := newExpect()
	require.NoError(t, expect.Locator(rows).ToHaveCount(rowsBefore+2))
	require.NoError(t, expect.Locator(rows.First()).ToContainText("192.0.2.52"))
}
