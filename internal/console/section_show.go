package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/web/templates"
)

// section is a top-level page. Until its feature lands it shows an empty
// state that says what will be there.
type section struct {
	path     string
	id       templates.Section
	title    string
	subtitle string
	empty    templates.EmptyState
}

var sections = []section{}

func (h *Handler) sectionShow(s section) echo.HandlerFunc {
	return func(c echo.Context) error {
		return render(c, http.StatusOK, templates.SectionPage(h.page(s.title, s.id), s.subtitle, s.empty))
	}
}
