package console

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/web/templates"
)

// loginShow is the sign-in form. Someone already signed in goes on to
// where they were headed.
func (h *Handler) loginShow(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if _, err := h.principal(c); err == nil {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return h.renderLogin(c, http.StatusOK, templates.LoginForm{Next: next})
}

func (h *Handler) renderLogin(c echo.Context, status int, form templates.LoginForm) error {
	form.CSRFToken = httpserver.CSRFToken(c)
	// A sign-in page is never cached: it carries a CSRF token.
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, status, templates.LoginPage(h.page("Sign in", ""), form))
}

// loginStatus answers {"signed_in": true|false}: the page script asks
// when its live stream fails, to tell an ended session from a network
// problem. Always 200: browsers log a 401 to the console as an error.
func (h *Handler) loginStatus(c echo.Context) error {
	_, err := h.principal(c)
	if err != nil && !errors.Is(err, auth.ErrNoSession) {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]bool{"signed_in": err == nil})
}
