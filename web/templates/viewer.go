package templates

import "context"

// Viewer is who is looking at a page, for the layout's user menu and the
// demo banner. The console's access check puts it in the request's
// context, so that page handlers need not pass it.
type Viewer struct {
	Name  string
	Role  string // viewer, operator or admin
	Admin bool
	// Demo: signed in automatically by demo mode.
	Demo bool
	// DemoPanel: `console demo` runs and the viewer may open its panel
	// (/demo), so the navigation lists it.
	DemoPanel bool
	// CSRFToken goes into forms and htmx requests; "" when the browser's
	// Sec-Fetch-Site header proves the request's origin instead.
	CSRFToken string
}

type viewerKey struct{}

// WithViewer returns ctx carrying v.
func WithViewer(ctx context.Context, v Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// ViewerFrom returns the viewer ctx carries; ok is false on pages served
// without a session (sign-in, errors of anonymous requests).
func ViewerFrom(ctx context.Context) (v Viewer, ok bool) {
	v, ok = ctx.Value(viewerKey{}).(Viewer)
	return v, ok
}

// LoginForm is the sign-in page's state.
type LoginForm struct {
	Name      string // echoed back after a failure; never the password
	Next      string // where to go after signing in; a local path
	Error     string
	CSRFToken string
	// NoAccount: no account exists yet and the visitor is on this
	// machine; the page says how to create the first admin.
	NoAccount bool
}

// AuditEntry is one row of the Audit page.
type AuditEntry struct {
	ID     int64
	At     string // UTC, "2006-01-02 15:04:05" like every page
	Actor  string
	Action string
	Target string
	// TargetHref is the page of what Target names; "": none.
	TargetHref string
	// Mode is a replay's or bulk job's mode: "redeliver" or "re-apply";
	// "" for other actions.
	Mode string
	// ReplayHref is the message a replay created; "": none.
	ReplayHref string
	// Filter is a bulk job's filter, as JSON; "": not a bulk job.
	Filter     string
	Reason     string
	Outcome    string
	RequestID  string
	RemoteAddr string
}

// AuditView is the Audit page: one keyset page of entries with its
// filters.
type AuditView struct {
	Entries  []AuditEntry
	Actor    string
	Action   string
	NextHref string // "": no older page
	Actions  []string
}

// SessionEntry is one live session on the Sessions page.
type SessionEntry struct {
	ID         int64
	User       string
	Role       string
	Created    string
	LastSeen   string
	Expires    string
	RemoteAddr string
	Current    bool
}
