package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/web/templates"
)

// auditActions are the filter's choices; operator actions add theirs.
var auditActions = []string{
	audit.ActionLogin, audit.ActionLogout, audit.ActionPasswordChange,
	audit.ActionUserAdd, audit.ActionUserDisable, audit.ActionSessionRevoke,
}

// auditList is the Audit page: newest first, keyset-paginated by id
// (?before=), filtered by ?actor= and ?action=. Admins only: the trail
// names accounts, addresses and reasons.
func (h *Handler) auditList(c echo.Context) error {
	f := audit.Filter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"), Limit: 50}
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "The page cursor is not valid.")
		}
		f.Before = n
	}
	rows, next, err := h.deps.AuditLog.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	view := templates.AuditView{Actor: f.Actor, Action: f.Action, Actions: auditActions, Entries: make([]templates.AuditEntry, len(rows))}
	for i, r := range rows {
		view.Entries[i] = templates.AuditEntry{
			ID: r.ID, At: r.At.UTC().Format(time.RFC3339), Actor: r.Actor, Action: r.Action, Target: r.Target,
			Reason: r.Reason, Outcome: string(r.Outcome), RequestID: r.RequestID, RemoteAddr: r.RemoteAddr,
		}
	}
	if next != 0 {
		q := url.Values{"before": {strconv.FormatInt(next, 10)}}
		if f.Actor != "" {
			q.Set("actor", f.Actor)
		}
		if f.Action != "" {
			q.Set("action", f.Action)
		}
		view.NextHref = "/audit?" + q.Encode()
	}
	return render(c, http.StatusOK, templates.AuditPage(h.page("Audit", templates.SectionAudit), view))
}
