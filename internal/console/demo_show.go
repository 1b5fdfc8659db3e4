package console

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/web/templates"
)

// DemoSettings are the knobs of `console demo` that its panel changes
// while it runs.
type DemoSettings struct {
	OrdersPerSecond float64 // orders (and their outbox events) written per second
	InboxPerSecond  float64 // signed webhooks sent to the inbox per second
	FailurePercent  int     // share of deliveries the flaky destination fails
	LatencyMs       int     // how long the flaky destination takes to answer
	Outage          bool    // the flaky destination answers 503 to everything
}

// DemoControl is the running demo: a traffic generator and a flaky
// destination. Implementations are safe for concurrent use.
type DemoControl interface {
	DemoSettings() DemoSettings
	SetDemoSettings(DemoSettings)
}

// demoShow renders the demo panel.
func (h *Handler) demoShow(c echo.Context) error {
	s := h.deps.DemoPanel.DemoSettings()
	v := templates.DemoPanel{
		OrdersPerSecond: strconv.FormatFloat(s.OrdersPerSecond, 'f', -1, 64),
		InboxPerSecond:  strconv.FormatFloat(s.InboxPerSecond, 'f', -1, 64),
		FailurePercent:  strconv.Itoa(s.FailurePercent),
		LatencyMs:       strconv.Itoa(s.LatencyMs),
		Outage:          s.Outage,
		Saved:           c.QueryParam("saved") == "1",
		CSRFToken:       httpserver.CSRFToken(c),
	}
	return render(c, http.StatusOK, templates.DemoPanelPage(h.page("Demo", templates.SectionDashboard), v))
}
