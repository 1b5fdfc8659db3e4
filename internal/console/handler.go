// Package console holds the web console's HTTP handlers and the table of its
// routes. Handlers read through the engine packages and the query layer,
// render templ components into a buffer (so a template error still becomes a
// clean 500) and return errors to the one error handler.
package console

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
	"github.com/switchyard/switchyard/web/static"
	"github.com/switchyard/switchyard/web/templates"
)

// Readiness reports whether the console can serve: the database answers and
// its schema is current. A nil error means ready.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Deps are what the handlers need. All fields are required unless marked
// optional.
type Deps struct {
	Logger    *slog.Logger // optional: nil discards
	Assets    *static.Assets
	Readiness Readiness
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// MetricsToken, when set, is the bearer token GET /metrics asks for;
	// MetricsHidden answers it 404, for a console whose metrics are
	// served elsewhere or not at all. Neither: public, which cmd/console
	// allows only on loopback.
	MetricsToken  string
	MetricsHidden bool
	// Events serves GET /events, the live change stream: the process's
	// one *sse.Hub. Optional: without it the route answers 503.
	Events http.Handler
	// Inbox receives POST /inbox/:source; its handler registry and
	// sources are built by the caller. Nil: every source is unknown.
	Inbox *inbox.Receiver
	// Getenv resolves the secret references of destinations and sources,
	// for the configuration page (which shows only whether each
	// resolves); nil: none resolves.
	Getenv func(string) string
	// DestinationsSaved is called after a destination was saved on the
	// configuration page: this process's dispatcher rereads destinations
	// at once (the others within 10 s). Optional.
	DestinationsSaved func()
	// InboxHandlers names the Go handlers an inbox source may run besides
	// the built-in forward and sql, for the source form. Optional.
	InboxHandlers []string
	// NATSURL is the NATS server of JetStream destinations, whose streams
	// the destination form checks ("": the NATS default URL). Optional.
	NATSURL string
	// InboxMaxBody caps an inbox request's body; 0: DefaultInboxMaxBody.
	InboxMaxBody int64
	// IdempotencyTTL: how long an action's Idempotency-Key and response
	// are kept; 0: idempotency.DefaultTTL.
	IdempotencyTTL time.Duration
	// DB is the database the pages read.
	DB *pgxpool.Pool

	// Auth signs people in and checks sessions. Required.
	Auth *auth.Service
	// Streams closes the live streams of revoked sessions. Optional: nil
	// streams last until the browser reconnects.
	Streams *auth.StreamGuard
	// AuditLog is read by the Audit page. Required.
	AuditLog AuditLog
	// Demo signs every request from a loopback peer in as auth.DemoAdmin
	// when it carries no session. The caller allows it only on loopback.
	Demo bool
	// SecureCookies marks cookies Secure and gives them the __Host-
	// prefix: the console is reached over TLS (directly or via a proxy).
	SecureCookies bool
	// ViewerPayloads shows message payloads to viewers; by default only
	// operators and admins see them.
	ViewerPayloads bool
	// Stats serves the dashboard's statistics (a *stats.Reader).
	// Optional: without it the dashboard shows no figures.
	Stats StatsSource
	// Feed reports how the process's change feed is doing (a
	// *changefeed.Listener), for the dashboard. Optional.
	Feed FeedStatus
	// DemoPanel is the running `console demo`; nil otherwise (no demo
	// panel).
	DemoPanel DemoPanel
	// Triage runs triage mutations (the HTTP fallback); TriageSocket
	// serves /ws. Optional: without them those routes answer 503.
	Triage       *triage.Engine
	TriageSocket *ws.Server
	// ListRate and ListBurst are each session's token bucket for the
	// expensive lists (list_throttle.go); 0: ListRate and ListBurst.
	ListRate  rate.Limit
	ListBurst int
	// Notify is called after an action commits, which appended changes to
	// the feed (its audit row, at least): a changefeed.Notifier's Poke.
	// Optional; it must not block.
	Notify func()
}

// AuditLog reads the audit trail (an audit.Log).
type AuditLog interface {
	List(ctx context.Context, f audit.Filter) ([]audit.Row, int64, error)
	// Actions lists every action recorded, for the page's filter.
	Actions(ctx context.Context) ([]string, error)
}

// Handler serves the console's routes.
type Handler struct {
	deps    Deps
	live    *liveCache      // the dashboard's rendered live region (dashboard_show.go)
	actions *action.Service // the operator actions (action.go)
	lists   *listThrottle   // expensive lists' buckets (list_throttle.go)
}

// New returns the console's handler set.
func New(deps Deps) *Handler {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{deps: deps, live: &liveCache{}, actions: newActions(deps), lists: newListThrottle(deps.ListRate, deps.ListBurst)}
}

func (h *Handler) page(title string, section templates.Section) templates.Page {
	return templates.Page{Title: title, Section: section, Assets: h.deps.Assets}
}

// render writes component as an HTML response with status.
func render(c echo.Context, status int, component templ.Component) error {
	var buf bytes.Buffer
	if err := component.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// RenderError is the httpserver.ErrorRenderer for HTML clients.
func (h *Handler) RenderError(c echo.Context, status int, message string) error {
	if c.Path() == inboxReceivePath {
		// Senders of webhooks are programs, promised JSON whatever went
		// wrong (docs/inbox.md): a 405, 421 or 413 included.
		return inboxAnswer(c, status, "error", message)
	}
	title := http.StatusText(status)
	if title == "" {
		title = "Error"
	}
	return render(c, status, templates.ErrorPage(h.page(title, ""), status, message))
}
