package console

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/web/templates"
)

// sessionList is the Sessions page: every live session, each with a
// Revoke button (admins only).
func (h *Handler) sessionList(c echo.Context) error {
	live, err := h.deps.Auth.Sessions(c.Request().Context(), 500)
	if err != nil {
		return err
	}
	me := current(c).SessionID
	entries := make([]templates.SessionEntry, len(live))
	for i, s := range live {
		entries[i] = templates.SessionEntry{
			ID: s.ID, User: s.User, Role: s.Role, RemoteAddr: s.RemoteAddr, Current: s.ID == me,
			Created: s.Created.UTC().Format(time.RFC3339), LastSeen: s.LastSeen.UTC().Format(time.RFC3339),
			Expires: s.Expires.UTC().Format(time.RFC3339),
		}
	}
	return render(c, http.StatusOK, templates.SessionsPage(h.page("Sessions", ""), entries))
}
