package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBrowserLogCatchesProblems shows that the check newPage installs can
// fail: a page that breaks its CSP and throws must be reported.
func TestBrowserLogCatchesProblems(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'nonce-good'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>bad page</title>
<script nonce="good">console.log("allowed")</script>
<script>console.log("inline without the nonce")</script>
<script nonce="good">throw new Error("thrown on purpose")</script>`))
	}))
	t.Cleanup(srv.Close)

	bctx, log := openContext(t, srv.URL)
	page, err := bctx.NewPage()
	require.NoError(t, err)
	_, err = page.Goto("/")
	require.NoError(t, err)
	require.NoError(t, bctx.Close())

	problems := log.problems()
	for _, p := range problems {
		t.Log(p)
	}
	require.Contains(t, strings.Join(problems, "\n"), "Content Security Policy", "Chromium's own CSP report")
	require.Contains(t, strings.Join(problems, "\n"), "CSP violation: enforce script-src-elem blocked inline", "the init script's CSP report")
	require.Contains(t, strings.Join(problems, "\n"), "thrown on purpose")
	require.NotContains(t, strings.Join(problems, "\n"), "allowed")
}
