package console

import (
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard/switchyard/web/static"
)

// Register installs every route of the console on e. This is the one list of
// routes: a route added anywhere else is a bug.
func (h *Handler) Register(e *echo.Echo) {
	// Machine endpoints.
	e.GET("/healthz", h.healthShow)
	e.GET("/readyz", h.readinessShow)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(h.deps.Gatherer, promhttp.HandlerOpts{})))
	e.GET(static.Prefix+"*", echo.WrapHandler(h.deps.Assets.Handler()))
	e.HEAD(static.Prefix+"*", echo.WrapHandler(h.deps.Assets.Handler()))

	// Live updates (Server-Sent Events).
	e.GET("/events", h.eventsStream)

	// Signed webhooks from outside (docs/inbox.md).
	e.POST("/inbox/:source", h.inboxReceive)

	// Pages.
	e.GET("/", h.dashboardShow)
	e.GET("/dashboard/live", h.dashboardLive)
	e.GET("/inbox", h.inboxList)
	e.GET("/inbox/events/:id", h.inboxEventShow)
	if h.deps.Demo != nil { // console demo only
		e.GET("/demo", h.demoShow)
		e.POST("/demo", h.demoUpdate)
	}
	for _, s := range sections {
		e.GET(s.path, h.sectionShow(s))
	}
}
