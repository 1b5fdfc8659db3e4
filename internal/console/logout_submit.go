package console

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
)

// logoutSubmit ends the request's session everywhere (its open streams
// close within the change feed's delay) and goes to the sign-in page.
func (h *Handler) logoutSubmit(c echo.Context) error {
	err := h.deps.Auth.Logout(c.Request().Context(), current(c), c.RealIP())
	if err != nil && !errors.Is(err, auth.ErrNoSession) {
		return err
	}
	c.SetCookie(h.sessionCookie("", time.Time{}))
	return c.Redirect(http.StatusSeeOther, "/login")
}
