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
	for _, s := range sections {
		e.GET(s.path, h.sectionShow(s))
	}

	// The message browser. One group, so that a session and role check
	// can be added in one place.
	browse := e.Group("")
	browse.GET("/messages", h.messagesList)
	browse.GET("/messages/new", h.messagesNewCount)
	browse.GET("/messages/:id", h.messageShow)
	browse.GET("/messages/:id/payload", h.messagePayloadDownload)
	browse.GET("/m/:key", h.messageFind)
	browse.GET("/dead-letters", h.deadLettersList)
	browse.GET("/dead-letters/groups", h.deadLettersRegion)
	browse.GET("/dead-letters/:fingerprint", h.deadLetterGroupShow)
	browse.GET("/aggregates/blocked", h.aggregatesBlockedList)
}
