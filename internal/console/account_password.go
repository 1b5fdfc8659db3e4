package console

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/web/templates"
)

// accountPassword changes the signed-in account's password. Every session
// of the account ends, on every instance; this browser gets a new one at
// once, so only the others must sign in again.
func (h *Handler) accountPassword(c echo.Context) error {
	ctx := c.Request().Context()
	p := current(c)
	if p.SessionID == 0 {
		return echo.NewHTTPError(http.StatusForbidden, "The demo admin has no password to change.")
	}
	next := c.FormValue("new_password")
	if next != c.FormValue("new_password_again") {
		return render(c, http.StatusBadRequest, templates.AccountPage(h.page("Account", ""), "The two new passwords differ.", false))
	}
	err := h.deps.Auth.ChangeOwnPassword(ctx, p, c.FormValue("current_password"), next, c.RealIP())
	var throttled *auth.ThrottledError
	switch {
	case errors.As(err, &throttled):
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(throttled.RetryAfter/time.Second)))
		return render(c, http.StatusTooManyRequests, templates.AccountPage(h.page("Account", ""), "Too many failed attempts. Try again in "+throttled.RetryAfter.String()+".", false))
	case errors.Is(err, auth.ErrInvalidCredentials):
		return render(c, http.StatusUnauthorized, templates.AccountPage(h.page("Account", ""), "The current password is wrong.", false))
	case errors.Is(err, auth.ErrWeakPassword):
		return render(c, http.StatusBadRequest, templates.AccountPage(h.page("Account", ""), "The new password must be at least 12 characters.", false))
	case err != nil:
		return err
	}
	sess, err := h.deps.Auth.Login(ctx, p.Name, next, c.RealIP())
	if err != nil {
		c.SetCookie(h.sessionCookie("", time.Time{}))
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	c.SetCookie(h.sessionCookie(sess.Token, sess.ExpiresAt))
	return c.Redirect(http.StatusSeeOther, "/account?changed=1")
}
