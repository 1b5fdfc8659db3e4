package templates

import (
	"context"
	"net/url"
	"strconv"
)

// visibleNavigation is the navigation without the sections a signed-in
// viewer's role may not open (the server refuses them anyway). Pages
// served without a session (a 404) show every section: each leads to the
// sign-in form.
func visibleNavigation(ctx context.Context) []NavItem {
	v, signedIn := ViewerFrom(ctx)
	var items []NavItem
	for _, item := range Navigation() {
		if item.Section == SectionAudit && signedIn && !v.Admin {
			continue
		}
		if item.Section == SectionDemo && !v.DemoPanel {
			continue
		}
		items = append(items, item)
	}
	return items
}

func sessionRevokeURL(id int64) string {
	return "/sessions/" + strconv.FormatInt(id, 10) + "/revoke"
}

// auditRefreshURL reloads the first page with the current filters.
func auditRefreshURL(v AuditView) string {
	q := url.Values{}
	if v.Actor != "" {
		q.Set("actor", v.Actor)
	}
	if v.Action != "" {
		q.Set("action", v.Action)
	}
	if len(q) == 0 {
		return "/audit"
	}
	return "/audit?" + q.Encode()
}

func outcomeClass(outcome string) string {
	switch outcome {
	case "ok":
		return "ok"
	case "denied":
		return "warn"
	}
	return "bad"
}

// noSessions is the Sessions page without a session: a demo-mode viewer
// is signed in, only without a session, and must not read that nobody is.
func noSessions(ctx context.Context) EmptyState {
	if v, ok := ViewerFrom(ctx); ok && v.Demo {
		return EmptyState{Heading: "No account is signed in",
			Text: "You are signed in by demo mode, which needs no session. Sessions of people who sign in with an account appear here."}
	}
	return EmptyState{Heading: "No other session", Text: "Sessions appear here when people sign in."}
}
