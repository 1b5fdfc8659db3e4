package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/web/templates"
)

// repairJobsShown is how many bulk repair jobs the Reconciliation page
// shows.
const repairJobsShown = 5

// reconciliationRepair is POST /reconciliation/repair: a bulk repair job
// of every open finding of a check (and kind) (action.StartRepairJob),
// confirmed on the page beside its estimate; the page's live region shows
// its progress and a cancel.
func (h *Handler) reconciliationRepair(c echo.Context) error {
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return err
	}
	job, err := h.actions.StartRepairJob(c.Request().Context(), h.deps.DB, actor(c), action.RepairJobInput{
		Filter: reconcile.FindingFilter{Check: c.FormValue("check"), Kind: c.FormValue("kind")},
		Reason: strings.TrimSpace(c.FormValue("reason")), RequestID: rid})
	if msg := panelMessage(err); msg != "" {
		return render(c, http.StatusOK, templates.BulkRepairOutcome("", msg))
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("HX-Trigger", "finding-changed")
	return render(c, http.StatusOK, templates.BulkRepairOutcome(
		"Bulk repair started for ~"+strconv.FormatInt(job.Estimate, 10)+" findings: its progress is below.", ""))
}

// repairJobCancel is POST /reconciliation/repair-jobs/:id/cancel
// (action.CancelJob): what it repaired stays repaired.
func (h *Handler) repairJobCancel(c echo.Context) error {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound, "No such job.")
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return err
	}
	err = h.actions.CancelJob(c.Request().Context(), h.deps.DB, actor(c), action.JobCancelInput{JobID: id, RequestID: rid})
	if msg := panelMessage(err); msg != "" {
		return render(c, http.StatusOK, templates.BulkRepairOutcome("", msg))
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("HX-Trigger", "finding-changed")
	return render(c, http.StatusOK, templates.BulkRepairOutcome("Bulk repair cancelled; what it repaired stays repaired.", ""))
}

// repairJobViews is the newest bulk repair jobs, as the page shows them.
func (h *Handler) repairJobViews(c echo.Context) ([]templates.RepairJob, error) {
	jobs, err := queries.New(h.deps.DB).RepairJobListLatest(c.Request().Context(), repairJobsShown)
	if err != nil {
		return nil, err
	}
	out := make([]templates.RepairJob, len(jobs))
	for i, j := range jobs {
		out[i] = templates.RepairJob{ID: j.ID.String(), State: j.State, Filter: string(j.Filter), Actor: j.Actor,
			Started: utc(j.CreatedAt), Repaired: j.Replayed, Skipped: j.Skipped, Estimate: j.Estimate,
			CancelRequestID: uuid.NewString()}
	}
	return out, nil
}
