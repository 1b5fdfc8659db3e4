package console

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// demoUpdate applies the demo panel's form and returns to the panel.
func (h *Handler) demoUpdate(c echo.Context) error {
	orders, err1 := strconv.ParseFloat(c.FormValue("orders_per_second"), 64)
	inbox, err2 := strconv.ParseFloat(c.FormValue("inbox_per_second"), 64)
	failure, err3 := strconv.Atoi(c.FormValue("failure_percent"))
	latency, err4 := strconv.Atoi(c.FormValue("latency_ms"))
	switch {
	case err1 != nil || orders < 0 || orders > 2000:
		return echo.NewHTTPError(http.StatusBadRequest, "Orders per second: a number from 0 to 2000.")
	case err2 != nil || inbox < 0 || inbox > 200:
		return echo.NewHTTPError(http.StatusBadRequest, "Webhooks per second: a number from 0 to 200.")
	case err3 != nil || failure < 0 || failure > 100:
		return echo.NewHTTPError(http.StatusBadRequest, "Failure rate: a whole percentage from 0 to 100.")
	case err4 != nil || latency < 0 || latency > 30000:
		return echo.NewHTTPError(http.StatusBadRequest, "Latency: milliseconds from 0 to 30000.")
	}
	h.deps.DemoPanel.SetDemoSettings(DemoSettings{
		OrdersPerSecond: orders, InboxPerSecond: inbox, FailurePercent: failure, LatencyMs: latency,
		Outage: c.FormValue("outage") == "on",
	})
	return c.Redirect(http.StatusSeeOther, "/demo?saved=1")
}
