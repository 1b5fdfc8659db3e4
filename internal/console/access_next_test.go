package console

import "testing"

// safeNext keeps a local path and refuses anything a browser could read as
// another site.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/messages?state=dead":  "/messages?state=dead",
		"/dead-letters/abc":     "/dead-letters/abc",
		"":                      "/",
		"messages":              "/",
		"//evil.example":        "/",
		"/\\evil.example":       "/",
		"/\t/evil.example":      "/",
		"/\n/evil.example":      "/",
		"https://evil.example/": "/",
		"/login?next=/x":        "/",
		"/%2F%2Fevil.example":   "/%2F%2Fevil.example", // a path on this site, not a host
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
