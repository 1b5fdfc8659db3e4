package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
)

// settingsRoutes are the configuration pages' routes, part of the route
// table (routes). Every one is for admins; the unsafe ones record a
// forbidden refusal of their action (recordDenials). The saves are plain
// form posts answered with a redirect or the form again, so they are not
// behind the idempotency store: a save repeated saves the same values.
func (h *Handler) settingsRoutes() []route {
	deny := h.recordDenials
	get := func(path string, f echo.HandlerFunc) route { return route{http.MethodGet, path, auth.Admin, f} }
	post := func(path string, f echo.HandlerFunc) route { return route{http.MethodPost, path, auth.Admin, deny(f)} }
	return []route{
		get("/settings/live", h.settingsLive),
		get("/settings/destinations/new", h.destinationNew),
		post("/settings/destinations", h.destinationCreate),
		get("/settings/destinations/:name", h.destinationEdit),
		post("/settings/destinations/:name", h.destinationUpdate),
		post("/settings/destinations/:name/test", h.destinationTestSubmit),
		post("/settings/destinations/:name/rename", h.destinationRename),
		post("/settings/destinations/:name/delete", h.destinationDelete),
		get("/settings/destinations/:name/test/:id", h.destinationTestLive),
		get("/settings/sources/new", h.sourceNew),
		post("/settings/sources", h.sourceCreate),
		get("/settings/sources/:name", h.sourceEdit),
		post("/settings/sources/:name", h.sourceUpdate),
		post("/settings/sources/:name/test", h.sourceTestSubmit),
		post("/settings/sources/:name/rename", h.sourceRename),
		post("/settings/sources/:name/delete", h.sourceDelete),
	}
}
