package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/web/templates"
)

// findingShow is GET /reconciliation/findings/:id: the field diff, the
// history and, for operators, repair and ignore.
func (h *Handler) findingShow(c echo.Context) error {
	v, err := h.findingView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.FindingPage(h.page("Finding "+strconv.FormatInt(v.ID, 10), templates.SectionReconciliation), v))
}

// findingLive is GET /reconciliation/findings/:id/live, the page's live
// region.
func (h *Handler) findingLive(c echo.Context) error {
	v, err := h.findingView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.FindingLive(v))
}

// findingRepair is POST /reconciliation/findings/:id/repair
// (action.RepairFinding); a refusal is shown in the region, as its
// outcome.
func (h *Handler) findingRepair(c echo.Context) error {
	return h.findingAct(c, func(in action.FindingInput) (string, error) {
		r, err := h.actions.RepairFinding(c.Request().Context(), h.deps.DB, actor(c), in)
		if err != nil {
			return "", err
		}
		if r.Existing {
			return "This finding was already repaired for its last cycle: message " + strconv.FormatInt(r.MessageID, 10) + ".", nil
		}
		return "Repair enqueued as message " + strconv.FormatInt(r.MessageID, 10) + ", idempotency key " + r.Key.String() + ".", nil
	})
}

// findingIgnore is POST /reconciliation/findings/:id/ignore
// (action.IgnoreFinding).
func (h *Handler) findingIgnore(c echo.Context) error {
	return h.findingAct(c, func(in action.FindingInput) (string, error) {
		return "Finding ignored.", h.actions.IgnoreFinding(c.Request().Context(), h.deps.DB, actor(c), in)
	})
}

// findingAct runs act on the route's finding and renders its outcome; a
// refusal the operator can act on is shown in place (panelMessage), any
// other error goes to the error handler.
func (h *Handler) findingAct(c echo.Context, act func(action.FindingInput) (string, error)) error {
	id, err := findingID(c)
	if err != nil {
		return err
	}
	notice, err := act(action.FindingInput{FindingID: id, Reason: strings.TrimSpace(c.FormValue("reason"))})
	if msg := panelMessage(err); msg != "" {
		return render(c, http.StatusOK, templates.FindingOutcome("", msg))
	}
	if err != nil {
		return err
	}
	// The region shows the new status now; the stream tells other pages.
	c.Response().Header().Set("HX-Trigger", "finding-changed")
	return render(c, http.StatusOK, templates.FindingOutcome(notice, ""))
}

func findingID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, echo.NewHTTPError(http.StatusNotFound, "No such finding.")
	}
	return id, nil
}

func (h *Handler) findingView(c echo.Context) (templates.ReconcileFindingView, error) {
	if h.deps.DB == nil {
		return templates.ReconcileFindingView{}, echo.NewHTTPError(http.StatusServiceUnavailable, "Reconciliation is unavailable: this console has no database.")
	}
	id, err := findingID(c)
	if err != nil {
		return templates.ReconcileFindingView{}, err
	}
	ctx, q := c.Request().Context(), queries.New(h.deps.DB)
	f, err := q.ReconcileFindingGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return templates.ReconcileFindingView{}, echo.NewHTTPError(http.StatusNotFound, "No such finding.")
	}
	if err != nil {
		return templates.ReconcileFindingView{}, err
	}
	events, err := q.ReconcileFindingEventList(ctx, id)
	if err != nil {
		return templates.ReconcileFindingView{}, err
	}
	operator := current(c).Role.Allows(auth.Operator)
	v := templates.ReconcileFindingView{ID: f.ID, Check: f.CheckName, CheckKind: f.CheckKind, Key: f.Key, Kind: f.Kind, Status: f.Status,
		FirstSeen: utc(f.FirstSeenAt), LastSeen: utc(f.LastSeenAt), Diff: diffRows(f.Diff), CanOperate: operator,
		CanRepair: operator && (f.Status == reconcile.StatusOpen || f.Status == reconcile.StatusRepairRequested)}
	if f.ResolvedAt != nil {
		v.Resolved = utc(*f.ResolvedAt)
	}
	if f.Ref != nil {
		v.Ref = *f.Ref
	}
	if f.RepairMessage != nil {
		v.RepairMessage = *f.RepairMessage
	}
	for _, e := range events {
		ev := templates.FindingEvent{At: utc(e.At), Event: e.Event, Actor: e.Actor, Reason: e.Reason}
		if e.CycleID != nil {
			ev.Cycle = strconv.FormatInt(*e.CycleID, 10)
		}
		v.Events = append(v.Events, ev)
	}
	return v, nil
}

// diffRows turns a mismatch's stored diff into rows, by field name; each
// value is shown as its JSON text (escaped by the template).
func diffRows(raw []byte) []templates.FieldDiff {
	var d map[string]struct{ Local, Remote json.RawMessage }
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	out := make([]templates.FieldDiff, 0, len(d))
	for name, v := range d {
		out = append(out, templates.FieldDiff{Field: name, Local: string(v.Local), Remote: string(v.Remote)})
	}
	slices.SortFunc(out, func(a, b templates.FieldDiff) int { return strings.Compare(a.Field, b.Field) })
	return out
}
