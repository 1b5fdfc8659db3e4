package console

import (
	"net/http"
	"net/url"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/web/templates"
)

// DemoPanel is the page of a running `console demo` at /demo; the demo
// (internal/demo) implements it and the console only places it in its
// layout. It is optional: without one (Deps.DemoPanel nil) the console has
// no such page. Implementations are safe for concurrent use.
type DemoPanel interface {
	// Render is the panel inside page, its form carrying csrfToken;
	// saved: a change was just applied.
	Render(page templates.Page, csrfToken string, saved bool) templ.Component
	// Apply applies the panel's submitted form and returns "", or
	// refuses it with a sentence to show, changing nothing.
	Apply(form url.Values) (refusal string)
}

// demoShow renders the demo panel.
func (h *Handler) demoShow(c echo.Context) error {
	panel := h.deps.DemoPanel.Render(h.page("Demo", templates.SectionDemo), httpserver.CSRFToken(c), c.QueryParam("saved") == "1")
	return render(c, http.StatusOK, panel)
}

// demoUpdate applies the demo panel's form and returns to the panel.
func (h *Handler) demoUpdate(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	if refusal := h.deps.DemoPanel.Apply(form); refusal != "" {
		return echo.NewHTTPError(http.StatusBadRequest, refusal)
	}
	return c.Redirect(http.StatusSeeOther, "/demo?saved=1")
}
