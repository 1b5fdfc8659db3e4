package console

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/web/templates"
)

// Device cookie names (see auth.Attempt.Device), prefixed like the
// session's.
const (
	deviceCookie       = "switchyard_device"
	secureDeviceCookie = "__Host-switchyard_device"
)

// loginSubmit signs in. Success rotates the session: a session the browser
// already had is ended, and a new token is set, with a fresh device cookie
// that spares this browser the delays others cause. While a delay applies
// the answer is 429 with Retry-After (an attempt then is admitted); a
// wrong name or password 401, with one message for both.
func (h *Handler) loginSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	name, password := c.FormValue("name"), c.FormValue("password")
	form := templates.LoginForm{Name: name, Next: safeNext(c.FormValue("next"))}
	attempt := auth.Attempt{Name: name, Password: password, Addr: c.RealIP()}
	if device, err := c.Cookie(h.deviceCookieName()); err == nil {
		attempt.Device = device.Value
	}
	sess, err := h.deps.Auth.SignIn(ctx, attempt)
	var throttled *auth.ThrottledError
	switch {
	case errors.As(err, &throttled):
		h.deps.Logger.WarnContext(ctx, "sign-in throttled", slog.String("remote_ip", c.RealIP()), slog.Duration("retry_after", throttled.RetryAfter))
		secs := int(throttled.RetryAfter / time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		form.Error = "Too many failed attempts. Try again in " + throttled.RetryAfter.String() + "."
		return h.renderLogin(c, http.StatusTooManyRequests, form)
	case errors.Is(err, auth.ErrInvalidCredentials):
		form.Error = "Wrong name or password."
		return h.renderLogin(c, http.StatusUnauthorized, form)
	case err != nil:
		return err
	}
	if old, err := c.Cookie(h.cookieName()); err == nil {
		if p, err := h.deps.Auth.Authenticate(ctx, old.Value); err == nil {
			if err := h.deps.Auth.Logout(ctx, p, c.RealIP()); err != nil && !errors.Is(err, auth.ErrNoSession) {
				return err
			}
		}
	}
	c.SetCookie(h.sessionCookie(sess.Token, sess.ExpiresAt))
	c.SetCookie(&http.Cookie{
		Name: h.deviceCookieName(), Value: sess.Device, Path: "/",
		HttpOnly: true, Secure: h.deps.SecureCookies, SameSite: http.SameSiteStrictMode,
		Expires: sess.DeviceExpires,
	})
	return c.Redirect(http.StatusSeeOther, form.Next)
}

func (h *Handler) deviceCookieName() string {
	if h.deps.SecureCookies {
		return secureDeviceCookie
	}
	return deviceCookie
}

// sessionCookie is the cookie that carries token until expires; a zero
// expires deletes it.
func (h *Handler) sessionCookie(token string, expires time.Time) *http.Cookie {
	cookie := &http.Cookie{
		Name: h.cookieName(), Value: token, Path: "/",
		HttpOnly: true, Secure: h.deps.SecureCookies, SameSite: http.SameSiteLaxMode,
		Expires: expires,
	}
	if expires.IsZero() {
		cookie.MaxAge = -1
	}
	return cookie
}
