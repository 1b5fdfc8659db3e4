package templates

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// TestLiveRegionAlwaysRefreshesAfterLoss renders a region of one kind and
// checks that it also refreshes on what every live view must converge
// after: the stream's ready and resync, and the tab coming back.
func TestLiveRegionAlwaysRefreshesAfterLoss(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := LiveRegion(Live{Kinds: []string{"audit"}, Subjects: []string{"7"}, Also: []string{"every 10s"},
		Attrs: templ.Attributes{"id": "r", "hx-get": "/audit"}}).Render(context.Background(), &b)
	require.NoError(t, err)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
	require.NoError(t, err)
	region := doc.Find("#r")
	require.Equal(t, 1, region.Length(), b.String())
	require.Equal(t, "sse:audit, sse:ready, sse:resync, visibilitychange from:document, every 10s", region.AttrOr("hx-trigger", ""))
	require.Equal(t, "/audit", region.AttrOr("hx-get", ""))
	require.Equal(t, "/events?kind=audit&subject=7", region.Parent().AttrOr("sse-connect", ""))
	require.Equal(t, "sse", region.Parent().AttrOr("hx-ext", ""))
}

var (
	kindList    = regexp.MustCompile(`Kinds:\s*\[\]string\{([^}]*)\}`)
	quoted      = regexp.MustCompile(`"([^"]*)"`)
	handMadeSSE = regexp.MustCompile(`sse-connect|sse-swap|hx-ext="[^"]*sse|hx-trigger="[^"]*sse:`)
)

// TestEveryLiveRegionUsesTheContract reads the templates: every stream is
// opened by LiveRegion (a hand-made one would forget ready, resync or
// visibility, as the audit and replay pages once did), and every kind a
// region names is a change feed kind.
func TestEveryLiveRegionUsesTheContract(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.templ")
	require.NoError(t, err)
	regions := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		if f != "live.templ" {
			require.Falsef(t, handMadeSSE.Match(text), "%s opens or listens to a stream by hand: use LiveRegion", f)
		}
		for _, m := range kindList.FindAllStringSubmatch(string(text), -1) {
			regions++
			for _, k := range quoted.FindAllStringSubmatch(m[1], -1) {
				require.Truef(t, slices.Contains(changefeed.Kinds, k[1]), "%s: kind %q is not a changefeed kind", f, k[1])
			}
		}
	}
	// dashboard, messages, dead letters, message, actions, replays, audit
	require.GreaterOrEqual(t, regions, 6, "live regions found")
}

var (
	liveRegionCall = regexp.MustCompile(`(?s)@LiveRegion\(Live\{.*?\}\}\)`)
	swapAttr       = regexp.MustCompile(`"hx-swap":\s*"([^"]*)"`)
	targetAttr     = regexp.MustCompile(`"hx-target":\s*"([^"]*)"`)
)

// TestLiveRegionsKeepTheirElement reads the templates: no live region
// replaces its own element when it refreshes. A change arriving while a
// refresh is in flight queues the next refresh on the element; htmx
// drops it once a swap has removed the element, and the change is never
// shown (CI met it on the Audit page: a sign-in arriving during a refresh
// stayed missing).
func TestLiveRegionsKeepTheirElement(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.templ")
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, call := range liveRegionCall.FindAllString(string(text), -1) {
			checked++
			swap := swapAttr.FindStringSubmatch(call)
			if swap == nil || !strings.Contains(swap[1], "outerHTML") {
				continue
			}
			target := targetAttr.FindStringSubmatch(call)
			require.Truef(t, target != nil && strings.HasPrefix(target[1], "find "),
				"%s: a live region swaps its own element (outerHTML without a target inside it):\n%s", f, call)
		}
	}
	require.GreaterOrEqual(t, checked, 6, "live regions found")
}
