package console

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
)

// sessionRevoke ends one session everywhere, its open streams included,
// and returns to the Sessions page. Ending one that is already over is
// not an error: the page was stale.
func (h *Handler) sessionRevoke(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return echo.NewHTTPError(http.StatusNotFound, "No such session.")
	}
	err = h.deps.Auth.RevokeSession(c.Request().Context(), current(c), id, c.RealIP())
	if err != nil && !errors.Is(err, auth.ErrNoSession) {
		return err
	}
	if id == current(c).SessionID {
		c.SetCookie(h.sessionCookie("", time.Time{}))
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	return c.Redirect(http.StatusSeeOther, "/sessions")
}
