package e2e

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// navigation is the console's main navigation, in order.
var navigation = []struct{ testID, label string }{
	{"nav-dashboard", "Dashboard"},
	{"nav-messages", "Messages"},
	{"nav-dead-letters", "Dead letters"},
	{"nav-inbox", "Inbox"},
	{"nav-triage", "Triage"},
	{"nav-reconciliation", "Reconciliation"},
	{"nav-audit", "Audit"},
}

// hashedAsset is the shape of a content-hash asset URL, the only kind that
// may be cached as immutable.
var hashedAsset = regexp.MustCompile(`^/static/.+\.[0-9a-f]{8,}\.(css|js)$`)

// TestSmoke loads the dashboard, checks the frame every page shares, follows
// the navigation to Messages and checks the pinned assets are served to be
// cached forever.
func TestSmoke(t *testing.T) {
	t.Parallel()
	console := startConsole(t)
	page := newPage(t, console.URL)
	expect := newExpect()

	_, err := page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveTitle("Dashboard · Switchyard"))
	requireNavigation(t, page, "nav-dashboard")
	require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText("Dashboard"))
	require.NoError(t, expect.Locator(page.GetByTestId("empty-state")).ToBeVisible())
	screenshot(t, page, "dashboard")
	requireImmutableAssets(t, page, console.URL)

	link := page.GetByRole(*playwright.AriaRoleLink, playwright.PageGetByRoleOptions{Name: "Messages", Exact: playwright.Bool(true)})
	require.NoError(t, link.Click())
	require.NoError(t, expect.Page(page).ToHaveURL(console.URL+"/messages"))
	require.NoError(t, expect.Page(page).ToHaveTitle("Messages · Switchyard"))
	require.NoError(t, expect.Locator(page.Locator("h1")).ToHaveText("Messages"))
	require.NoError(t, expect.Locator(page.GetByTestId("page-title")).ToHaveText("Messages"))
	requireNavigation(t, page, "nav-messages")
	require.NoError(t, expect.Locator(page.GetByTestId("empty-state")).ToBeVisible())
	screenshot(t, page, "messages")
}

// requireNavigation checks that the navigation has exactly the section
// links, in order, and that only current is marked as the current page.
func requireNavigation(t *testing.T, page playwright.Page, current string) {
	t.Helper()
	expect := newExpect()
	nav := page.GetByTestId("nav")
	links := nav.Locator(`a[data-testid^="nav-"]`)
	labels := make([]string, len(navigation))
	for i, n := range navigation {
		labels[i] = n.label
	}
	require.NoError(t, expect.Locator(links).ToHaveCount(len(navigation)))
	require.NoError(t, expect.Locator(links).ToHaveText(labels))
	for i, n := range navigation {
		require.NoError(t, expect.Locator(links.Nth(i)).ToHaveAttribute("data-testid", n.testID))
	}
	marked := nav.Locator(`[aria-current="page"]`)
	require.NoError(t, expect.Locator(marked).ToHaveCount(1))
	require.NoError(t, expect.Locator(marked).ToHaveAttribute("data-testid", current))
}

// requireImmutableAssets fetches every stylesheet and script the page links
// to and checks that each has a content-hash URL served with 200 and an
// immutable cache header.
func requireImmutableAssets(t *testing.T, page playwright.Page, baseURL string) {
	t.Helper()
	stylesheets := assetURLs(t, page.Locator(`link[rel="stylesheet"]`), "href")
	require.NotEmpty(t, stylesheets, "the page links no stylesheet")
	scripts := assetURLs(t, page.Locator(`script[src]`), "src")
	for _, path := range append(stylesheets, scripts...) {
		require.Regexp(t, hashedAsset, path)
		resp, err := page.Request().Get(baseURL + path)
		require.NoError(t, err, "GET %s", path)
		require.Equal(t, http.StatusOK, resp.Status(), "GET %s", path)
		cache := resp.Headers()["cache-control"]
		require.Contains(t, cache, "immutable", "GET %s: Cache-Control", path)
	}
}

// assetURLs returns the attr attribute of every element of l.
func assetURLs(t *testing.T, l playwright.Locator, attr string) []string {
	t.Helper()
	elements, err := l.All()
	require.NoError(t, err)
	urls := make([]string, 0, len(elements))
	for _, el := range elements {
		v, err := el.GetAttribute(attr)
		require.NoError(t, err)
		urls = append(urls, v)
	}
	return urls
}
