package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/web/templates"
)

// accountShow is the signed-in account's page: who they are and the form
// to change their password.
func (h *Handler) accountShow(c echo.Context) error {
	return render(c, http.StatusOK, templates.AccountPage(h.page("Account", ""), "", c.QueryParam("changed") == "1"))
}
