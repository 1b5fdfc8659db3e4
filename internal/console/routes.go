package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/web/static"
)

// route is one entry of the route table: the least role that may use it is
// part of the route, so that no route exists without one (TestRouteTable
// walks every registered route for every role).
type route struct {
	method, path string
	role         auth.Role // auth.Public: no session needed
	handler      echo.HandlerFunc
}

// routes is the one list of routes: a route added anywhere else is a bug.
func (h *Handler) routes() []route {
	assets := echo.WrapHandler(h.deps.Assets.Handler())
	rs := []route{
		// Machine endpoints: no session. /metrics holds counts labelled by
		// route template and destination name, no payloads; scrapers
		// cannot sign in, so it has a token of its own (metrics_show.go).
		{http.MethodGet, "/healthz", auth.Public, h.healthShow},
		{http.MethodGet, "/readyz", auth.Public, h.readinessShow},
		{http.MethodGet, "/metrics", auth.Public, h.metricsShow},
		{http.MethodGet, static.Prefix + "*", auth.Public, assets},
		{http.MethodHead, static.Prefix + "*", auth.Public, assets},

		// Signed webhooks from outside (docs/inbox.md): their signature is
		// their authentication, and they are exempt from CSRF.
		{http.MethodPost, inboxReceivePath, auth.Public, h.inboxReceive},

		// Sign-in.
		{http.MethodGet, "/login", auth.Public, h.loginShow},
		{http.MethodPost, "/login", auth.Public, h.loginSubmit},
		{http.MethodGet, "/login/status", auth.Public, h.loginStatus},
		{http.MethodPost, "/logout", auth.Viewer, h.logoutSubmit},
		{http.MethodGet, "/account", auth.Viewer, h.accountShow},
		{http.MethodPost, "/account/password", auth.Viewer, h.accountPassword},

		// Live updates (Server-Sent Events).
		{http.MethodGet, "/events", auth.Viewer, h.eventsStream},

		// The message browser. Lists whose filters may read a search
		// window per request are throttled per session (list_throttle.go).
		{http.MethodGet, "/messages", auth.Viewer, h.throttled(h.messagesList)},
		{http.MethodGet, "/messages/new", auth.Viewer, h.messagesNewCount},
		{http.MethodGet, "/messages/:id", auth.Viewer, h.messageShow},
		// Its live regions, re-fetched when the message changes.
		{http.MethodGet, "/messages/:id/live", auth.Viewer, h.messageLive},
		// The raw payload, unredacted: operators (the page shows viewers a
		// redacted one unless --viewer-payloads).
		{http.MethodGet, "/messages/:id/payload", auth.Operator, h.messagePayloadDownload},
		{http.MethodGet, "/m/:key", auth.Viewer, h.messageFind},
		{http.MethodGet, "/dead-letters", auth.Viewer, h.deadLettersList},
		{http.MethodGet, "/dead-letters/groups", auth.Viewer, h.deadLettersRegion},
		{http.MethodGet, "/dead-letters/:fingerprint", auth.Viewer, h.deadLetterGroupShow},
		{http.MethodGet, "/aggregates/blocked", auth.Viewer, h.aggregatesBlockedList},

		// Administration.
		{http.MethodGet, "/audit", auth.Admin, h.throttled(h.auditList)},
		{http.MethodGet, "/sessions", auth.Admin, h.sessionList},
		{http.MethodPost, "/sessions/:id/revoke", auth.Admin, h.sessionRevoke},
		{http.MethodGet, "/settings", auth.Admin, h.settingsShow},
	}
	// The configuration pages (settings_*.go, destination_form.go,
	// source_form.go): admins only; internal/action checks the role again.
	rs = append(rs, h.settingsRoutes()...)
	// The dashboard and the inbox.
	rs = append(rs,
		route{http.MethodGet, "/", auth.Viewer, h.dashboardShow},
		route{http.MethodGet, "/dashboard/live", auth.Viewer, h.dashboardLive},
		route{http.MethodGet, "/inbox", auth.Viewer, h.throttled(h.inboxList)},
		route{http.MethodGet, "/inbox/live", auth.Viewer, h.throttled(h.inboxListLive)},
		route{http.MethodGet, "/inbox/events/:id", auth.Viewer, h.inboxEventShow},
		route{http.MethodGet, "/inbox/events/:id/live", auth.Viewer, h.inboxEventLive},
		// A retry of a failed or parked event (action.RetryInboxEvent),
		// from its page and from the list.
		route{http.MethodPost, "/inbox/events/:id/retry", auth.Operator, h.idempotent(h.inboxEventRetry)},
	)
	// Reconciliation (reconciliation_*.go; repairs and ignores need the
	// operator role, which internal/action checks again).
	rs = append(rs,
		route{http.MethodGet, "/reconciliation", auth.Viewer, h.reconciliationList},
		route{http.MethodGet, "/reconciliation/live", auth.Viewer, h.reconciliationLive},
		route{http.MethodGet, "/reconciliation/drift", auth.Viewer, h.reconciliationDrift},
		route{http.MethodGet, "/reconciliation/findings/:id", auth.Viewer, h.findingShow},
		route{http.MethodGet, "/reconciliation/findings/:id/live", auth.Viewer, h.findingLive},
		route{http.MethodPost, "/reconciliation/findings/:id/repair", auth.Operator, h.recordDenials(h.findingRepair)},
		route{http.MethodPost, "/reconciliation/findings/:id/ignore", auth.Operator, h.recordDenials(h.findingIgnore)},
		route{http.MethodPost, "/reconciliation/repair", auth.Operator, h.idempotent(h.reconciliationRepair)},
		route{http.MethodPost, "/reconciliation/repair-jobs/:id/cancel", auth.Operator, h.idempotent(h.repairJobCancel)},
	)
	if h.deps.DemoPanel != nil { // console demo only: its traffic generator's panel
		rs = append(rs,
			route{http.MethodGet, "/demo", auth.Operator, h.demoShow},
			route{http.MethodPost, "/demo", auth.Operator, h.demoUpdate},
		)
	}
	// Collaborative triage: pages, the socket and its HTTP fallback. A
	// viewer may open the socket and post mutations: the engine refuses
	// and audits their mutations itself, as it does over the socket.
	rs = append(rs,
		route{http.MethodGet, "/triage", auth.Viewer, h.triageBoard},
		route{http.MethodGet, "/triage/items/:id", auth.Viewer, h.triageItemShow},
		route{http.MethodPost, "/triage/mutations", auth.Viewer, h.triageMutate},
		route{http.MethodGet, "/ws", auth.Viewer, h.triageSocket},
	)
	// Operator actions (action_routes.go).
	rs = append(rs, h.actionRoutes()...)
	// Sections without a page of their own yet.
	for _, s := range sections {
		rs = append(rs, route{http.MethodGet, s.path, auth.Viewer, h.sectionShow(s)})
	}
	return rs
}

// Register installs every route of the console on e, each behind the
// check of its role and the edge check of its fields (field_check.go).
func (h *Handler) Register(e *echo.Echo) {
	for _, r := range h.routes() {
		e.Add(r.method, r.path, h.fieldChecked(r.role, r.handler))
	}
}

// RouteRoles returns the least role of every route, keyed "METHOD path"
// as echo's Routes() reports them.
func (h *Handler) RouteRoles() map[string]auth.Role {
	roles := map[string]auth.Role{}
	for _, r := range h.routes() {
		roles[r.method+" "+r.path] = r.role
	}
	return roles
}

// CSRFExempt reports whether a request skips the CSRF middleware: the
// signature-authenticated webhook receiver, and the safe requests of
// machine endpoints and assets, which need no token and must not carry a
// token cookie (a shared cache could hand one to everybody).
func CSRFExempt(c echo.Context) bool {
	switch c.Path() {
	case inboxReceivePath:
		// Every method: POST is signature-authenticated, and the others
		// change nothing and get 405 rather than a CSRF refusal.
		return true
	case "/healthz", "/readyz", "/metrics", static.Prefix + "*":
		return c.Request().Method == http.MethodGet || c.Request().Method == http.MethodHead
	}
	return false
}
