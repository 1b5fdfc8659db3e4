package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/web/templates"
)

// jobsShown is how many of the newest jobs the Replays page lists.
const jobsShown = 50

// defaultRate is the new job form's replays per second.
const defaultRate = 50

// replaysShow is GET /replays: the new bulk replay form (operators) and the
// newest jobs with live progress.
func (h *Handler) replaysShow(c echo.Context) error {
	jobs, err := h.replayJobs(c)
	if err != nil {
		return err
	}
	v := templates.ReplaysView{CanOperate: current(c).Role.Allows(auth.Operator), Jobs: jobs,
		Form: templates.BulkForm{Mode: string(outbox.Redeliver), Rate: defaultRate, RequestID: uuid.NewString()}}
	return render(c, http.StatusOK, templates.ReplaysPage(h.page("Replays", templates.SectionDeadLetters), v))
}

// replayJobsFragment is GET /replays/jobs: the jobs table alone, which the
// page reloads on every replay_job change.
func (h *Handler) replayJobsFragment(c echo.Context) error {
	jobs, err := h.replayJobs(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.ReplayJobsTable(jobs))
}

func (h *Handler) replayJobs(c echo.Context) ([]templates.ReplayJob, error) {
	if h.deps.DB == nil {
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, "Actions are unavailable: this console has no database.")
	}
	rows, err := h.queries().ReplayJobList(c.Request().Context(), jobsShown)
	if err != nil {
		return nil, err
	}
	operator := current(c).Role.Allows(auth.Operator)
	jobs := make([]templates.ReplayJob, len(rows))
	for i, j := range rows {
		jobs[i] = templates.ReplayJob{ID: j.ID.String(), State: j.State, Mode: j.Mode, Actor: j.Actor, Reason: j.Reason,
			Filter: string(j.Filter), Rate: j.RatePerSec, Estimate: j.Estimate, Replayed: j.Replayed, Skipped: j.Skipped,
			Created: j.CreatedAt.UTC().Format("2006-01-02 15:04:05"), CanCancel: operator && j.State == "running",
			RequestID: uuid.NewString()}
	}
	return jobs, nil
}

// bulkForm reads the new job form.
func bulkForm(c echo.Context) (templates.BulkForm, JobSpec) {
	f := templates.BulkForm{
		Fingerprint: strings.TrimSpace(c.FormValue("fingerprint")), Destination: strings.TrimSpace(c.FormValue("destination")),
		Topic: strings.TrimSpace(c.FormValue("topic")), AggregateType: strings.TrimSpace(c.FormValue("aggregate_type")),
		AggregateID: strings.TrimSpace(c.FormValue("aggregate_id")), ErrorContains: strings.TrimSpace(c.FormValue("error_contains")),
		Mode: c.FormValue("mode"), Reason: strings.TrimSpace(c.FormValue("reason")), RequestID: c.FormValue("request_id"),
	}
	if f.Mode != string(outbox.Reapply) {
		f.Mode = string(outbox.Redeliver)
	}
	f.Rate, _ = strconv.Atoi(c.FormValue("rate"))
	if f.Rate <= 0 {
		f.Rate = defaultRate
	}
	f.Estimate, _ = strconv.ParseInt(c.FormValue("estimate"), 10, 64)
	return f, JobSpec{
		Filter: bulkreplay.Filter{Fingerprint: f.Fingerprint, Destination: f.Destination, Topic: f.Topic,
			AggregateType: f.AggregateType, AggregateID: f.AggregateID, ErrorContains: f.ErrorContains},
		Mode: outbox.ReplayMode(f.Mode), Reason: f.Reason, RatePerSecond: f.Rate, RequestID: f.RequestID, Estimate: f.Estimate,
	}
}

// replaysEstimate is the form's Estimate button: the count the filter
// matches and the confirm button. It changes nothing.
func (h *Handler) replaysEstimate(c echo.Context) error {
	f, s := bulkForm(c)
	if _, err := uuid.Parse(f.RequestID); err != nil {
		f.RequestID = uuid.NewString()
	}
	if s.Mode == outbox.Reapply && s.Reason == "" {
		f.Error = "Re-applying needs a reason: say why these messages are applied again."
		return render(c, http.StatusOK, templates.BulkReplayForm(f))
	}
	n, err := h.estimate(c.Request().Context(), s.Filter)
	if err != nil {
		return err
	}
	f.Estimated, f.Estimate, f.AtLeast = true, n, n >= bulkreplay.MaxEstimate
	return render(c, http.StatusOK, templates.BulkReplayForm(f))
}

// replaysStart is the confirm button: start the job, then show a fresh
// form and have the jobs table reload.
func (h *Handler) replaysStart(c echo.Context) error {
	f, s := bulkForm(c)
	rid, err := requestID(c, f.RequestID)
	if err == nil {
		_, err = h.startJob(c, s, rid)
	}
	if err != nil {
		if f.Error = refusalMessage(err); f.Error == "" {
			return err
		}
		f.RequestID = uuid.NewString()
		return render(c, http.StatusOK, templates.BulkReplayForm(f))
	}
	c.Response().Header().Set("HX-Trigger", "replay-jobs-changed")
	return render(c, http.StatusOK, templates.BulkReplayForm(templates.BulkForm{
		Mode: string(outbox.Redeliver), Rate: defaultRate, RequestID: uuid.NewString(),
	}))
}

// replaysCancel is a job's Cancel button; it answers with the jobs table.
func (h *Handler) replaysCancel(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return err
	}
	if err := h.cancelJob(c, id, rid); err != nil && refusalMessage(err) == "" {
		return err
	}
	return h.replayJobsFragment(c)
}
