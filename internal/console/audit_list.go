package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/web/templates"
)

// auditListActions are the filter's choices before anything was recorded;
// the page adds every action the trail holds (audit.Log.Actions).
var auditListActions = []string{
	audit.ActionLogin, audit.ActionLogout, audit.ActionPasswordChange,
	audit.ActionUserAdd, audit.ActionUserDisable, audit.ActionSessionRevoke,
	action.AuditReplay, action.AuditEditReplay, action.AuditDiscard, action.AuditRestore,
	action.AuditJobStart, action.AuditJobCancel,
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
	ctx := c.Request().Context()
	rows, next, err := h.deps.AuditLog.List(ctx, f)
	if err != nil {
		return err
	}
	recorded, err := h.deps.AuditLog.Actions(ctx)
	if err != nil {
		return err
	}
	actions := slices.Concat(auditListActions, recorded)
	if f.Action != "" {
		actions = append(actions, f.Action) // kept selected even when unknown
	}
	slices.Sort(actions)
	view := templates.AuditView{Actor: f.Actor, Action: f.Action, Actions: slices.Compact(actions), Entries: make([]templates.AuditEntry, len(rows))}
	for i, r := range rows {
		view.Entries[i] = auditEntry(r)
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
