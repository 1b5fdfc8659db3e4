package console

import (
	"errors"
	"net"
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
	form := templates.LoginForm{Next: next}
	if fromLoopback(c.Request().RemoteAddr) {
		exist, err := h.deps.Auth.AccountsExist(c.Request().Context())
		if err != nil {
			return err
		}
		form.NoAccount = !exist
	}
	return h.renderLogin(c, http.StatusOK, form)
}

// fromLoopback reports whether the connection comes from this machine:
// only there does the sign-in page say how to create the first account
// (the console serves other addresses only once an account exists).
func fromLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
