package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// jobsShown is how many of the newest jobs the Replays page lists.
const jobsShown = 50

// defaultRate is the new job form's replays per second.
const defaultRate = 50

// bulkForm reads the new job form, and the job it asks for (without its
// request id, which the caller parses). err is a 400 naming a time it
// cannot read; the form is still filled in.
func bulkForm(c echo.Context) (f templates.BulkForm, in action.JobStartInput, err error) {
	f = templates.BulkForm{
		Fingerprint: strings.TrimSpace(c.FormValue("fingerprint")), Destination: strings.TrimSpace(c.FormValue("destination")),
		Topic: strings.TrimSpace(c.FormValue("topic")), AggregateType: strings.TrimSpace(c.FormValue("aggregate_type")),
		AggregateID: strings.TrimSpace(c.FormValue("aggregate_id")), ErrorContains: strings.TrimSpace(c.FormValue("error_contains")),
		All: c.FormValue("all") == "true", BlockedHeads: c.FormValue("blocked_heads") == "true",
		Mode: c.FormValue("mode"), Reason: strings.TrimSpace(c.FormValue("reason")), RequestID: c.FormValue("request_id"),
		CreatedFrom: strings.TrimSpace(c.FormValue("created_from")), CreatedTo: strings.TrimSpace(c.FormValue("created_to")),
	}
	if f.Mode != string(outbox.Reapply) {
		f.Mode = string(outbox.Redeliver)
	}
	f.Rate, _ = strconv.Atoi(c.FormValue("rate"))
	if f.Rate <= 0 {
		f.Rate = defaultRate
	}
	in = action.JobStartInput{
		Filter: bulkreplay.Filter{Fingerprint: f.Fingerprint, Destination: f.Destination, Topic: f.Topic,
			AggregateType: f.AggregateType, AggregateID: f.AggregateID, ErrorContains: f.ErrorContains,
			BlockedHeads: f.BlockedHeads},
		All: f.All, Mode: outbox.ReplayMode(f.Mode), Reason: f.Reason, RatePerSecond: f.Rate,
	}
	err = readCreatedWindow(&f, &in.Filter)
	// The form is shown again with what was sent, but never a value over
	// its maximum (which the action refuses): it would swell the page.
	for _, v := range []*string{&f.Fingerprint, &f.Destination, &f.Topic, &f.AggregateType, &f.AggregateID, &f.ErrorContains} {
		*v = fitting(*v, action.MaxFilterChars)
	}
	f.Reason = fitting(f.Reason, action.MaxReasonChars)
	return f, in, err
}

// readCreatedWindow reads the form's created_from and created_to (the
// message list's from and to, in its format) into filter, and shows them
// in the form as the list does (datetime-local, UTC).
func readCreatedWindow(f *templates.BulkForm, filter *bulkreplay.Filter) error {
	from, err := parseLocalTime(f.CreatedFrom, "Created from")
	if err != nil {
		f.CreatedFrom = ""
		return err
	}
	to, err := parseLocalTime(f.CreatedTo, "Created to")
	if err != nil {
		f.CreatedTo = ""
		return err
	}
	if from != nil {
		filter.CreatedFrom, f.CreatedFrom = *from, localTimeValue(*from)
	}
	if to != nil {
		filter.CreatedTo, f.CreatedTo = *to, localTimeValue(*to)
	}
	return nil
}

// fitting is value, or "" when it is longer than maxChars characters.
func fitting(value string, maxChars int) string {
	if utf8.RuneCountInString(value) > maxChars {
		return ""
	}
	return value
}

// bulkFormRefused shows err's message on the form f, with a fresh request
// id; an error that is no refusal is returned.
func bulkFormRefused(c echo.Context, f templates.BulkForm, err error) error {
	if f.Error = panelMessage(err); f.Error == "" {
		return err
	}
	f.RequestID, f.Estimated = uuid.NewString(), false
	return render(c, http.StatusOK, templates.BulkReplayForm(f))
}

// replayJobs reads the newest jobs for the jobs table.
func (h *Handler) replayJobs(c echo.Context) ([]templates.ReplayJob, error) {
	if err := h.readDB(); err != nil {
		return nil, err
	}
	rows, err := queries.New(h.deps.DB).ReplayJobList(c.Request().Context(), jobsShown)
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
	return jobs, jobOutcomes(c.Request().Context(), queries.New(h.deps.DB), rows, jobs)
}

// jobOutcomes fills in what became of the replays of jobs (rows, in the
// same order): delivered, dead again, pending.
func jobOutcomes(ctx context.Context, q *queries.Queries, rows []queries.SwitchyardReplayJob, jobs []templates.ReplayJob) error {
	ids := make([]uuid.UUID, len(rows))
	for i, j := range rows {
		ids[i] = j.ID
	}
	counts, err := countOutcomes(ctx, q, ids)
	if err != nil {
		return err
	}
	for i, j := range rows {
		n := counts[j.ID]
		jobs[i].Delivered, jobs[i].DeadAgain, jobs[i].Pending = n.Delivered, n.DeadAgain, n.Pending
	}
	return nil
}

// outcomes counts a job's replays by how they settled.
type outcomes struct {
	Delivered, DeadAgain, Pending int64
}

// countOutcomes reads the outcomes of the replays of jobs (the Replays
// page's and the JSON API's): a job without replays has none.
func countOutcomes(ctx context.Context, q *queries.Queries, jobs []uuid.UUID) (map[uuid.UUID]outcomes, error) {
	counts, err := q.ReplayJobListOutcomes(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("count the outcomes of %d replay jobs: %w", len(jobs), err)
	}
	at := make(map[uuid.UUID]outcomes, len(jobs))
	for _, n := range counts {
		o := at[n.Job]
		switch n.State {
		case "delivered":
			o.Delivered += n.Messages
		case "pending":
			o.Pending += n.Messages
		default: // dead, or dead and since discarded
			o.DeadAgain += n.Messages
		}
		at[n.Job] = o
	}
	return at, nil
}
