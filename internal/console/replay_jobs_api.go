package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Audit actions of bulk replay jobs.
const (
	actionJobStart  = "replay_job.start"
	actionJobCancel = "replay_job.cancel"
)

// JobSpec is a bulk replay job to start, as the JSON API takes it.
type JobSpec struct {
	Filter        bulkreplay.Filter `json:"filter"`
	Mode          outbox.ReplayMode `json:"mode"`
	Reason        string            `json:"reason"`
	RatePerSecond int               `json:"rate_per_second"`
	// Estimate is the count the operator confirmed (from the estimate).
	Estimate  int64  `json:"estimate"`
	RequestID string `json:"request_id"`
}

// JobView is a bulk replay job as the JSON API shows it.
type JobView struct {
	ID            uuid.UUID       `json:"id"`
	State         string          `json:"state"`
	Filter        json.RawMessage `json:"filter"`
	Mode          string          `json:"mode"`
	Actor         string          `json:"actor"`
	Reason        string          `json:"reason"`
	RatePerSecond int32           `json:"rate_per_second"`
	Estimate      int64           `json:"estimate"`
	Replayed      int64           `json:"replayed"`
	Skipped       int64           `json:"skipped"`
	CreatedAt     time.Time       `json:"created_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
}

func jobView(j bulkreplay.Job) JobView {
	return JobView{ID: j.ID, State: j.State, Filter: j.Filter, Mode: j.Mode, Actor: j.Actor, Reason: j.Reason,
		RatePerSecond: j.RatePerSec, Estimate: j.Estimate, Replayed: j.Replayed, Skipped: j.Skipped,
		CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt}
}

// EstimateResponse answers POST /api/replay-jobs/estimate.
type EstimateResponse struct {
	Estimate int64 `json:"estimate"`
	// AtLeast: counting stopped at bulkreplay.MaxEstimate.
	AtLeast bool `json:"at_least"`
}

// apiJobEstimate is POST /api/replay-jobs/estimate {filter}: it changes
// nothing, but it is an operator's question before starting a job.
func (h *Handler) apiJobEstimate(c echo.Context) error {
	var body struct {
		Filter bulkreplay.Filter `json:"filter"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	n, err := h.estimate(c.Request().Context(), body.Filter)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, EstimateResponse{Estimate: n, AtLeast: n >= bulkreplay.MaxEstimate})
}

func (h *Handler) estimate(ctx context.Context, f bulkreplay.Filter) (int64, error) {
	if h.deps.DB == nil {
		return 0, echo.NewHTTPError(http.StatusServiceUnavailable, "Actions are unavailable: this console has no database.")
	}
	return bulkreplay.Estimate(ctx, h.deps.DB, f)
}

// startJob starts a job with its audit row, whose detail records the
// filter. A job already running for the filter is a refusal that names it.
func (h *Handler) startJob(c echo.Context, s JobSpec, rid uuid.UUID) (bulkreplay.Job, error) {
	var job bulkreplay.Job
	err := h.act(c, audit.Entry{Action: actionJobStart, Reason: s.Reason, RequestID: rid.String()},
		func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
			var err error
			job, err = bulkreplay.Start(ctx, tx, bulkreplay.Spec{Filter: s.Filter, Mode: s.Mode, Actor: current(c).Name,
				Reason: s.Reason, RatePerSecond: s.RatePerSecond, Estimate: s.Estimate})
			if err != nil {
				return false, err
			}
			e.Target = "replay job " + job.ID.String()
			e.Detail, err = json.Marshal(map[string]any{"filter": json.RawMessage(job.Filter), "mode": job.Mode,
				"rate_per_second": job.RatePerSec, "estimate": job.Estimate})
			return false, err
		})
	if errors.Is(err, bulkreplay.ErrAlreadyRunning) {
		return job, echo.NewHTTPError(http.StatusConflict,
			"A bulk replay job for this filter is already running ("+job.ID.String()+"): cancel it or wait for it to finish.")
	}
	return job, refusal(err)
}

// apiJobStart is POST /api/replay-jobs.
func (h *Handler) apiJobStart(c echo.Context) error {
	var s JobSpec
	if err := decodeJSON(c, &s); err != nil {
		return err
	}
	rid, err := requestID(c, s.RequestID)
	if err != nil {
		return err
	}
	if s.Mode == "" {
		s.Mode = outbox.Redeliver
	}
	job, err := h.startJob(c, s, rid)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, jobView(job))
}

// cancelJob cancels a running job with its audit row.
func (h *Handler) cancelJob(c echo.Context, id uuid.UUID, rid uuid.UUID) error {
	return h.act(c, audit.Entry{Action: actionJobCancel, Target: "replay job " + id.String(), RequestID: rid.String()},
		func(ctx context.Context, tx pgx.Tx, _ *audit.Entry) (bool, error) {
			running, err := bulkreplay.Cancel(ctx, tx, id)
			if err == nil && !running {
				err = echo.NewHTTPError(http.StatusConflict, "This job is not running: it finished or was cancelled already.")
			}
			return false, err
		})
}

// apiJobCancel is POST /api/replay-jobs/:id/cancel.
func (h *Handler) apiJobCancel(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	var body actionBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	rid, err := requestID(c, body.RequestID)
	if err != nil {
		return err
	}
	if err := h.cancelJob(c, id, rid); err != nil {
		return err
	}
	return h.apiJobShow(c)
}

// apiJobShow is GET /api/replay-jobs/:id.
func (h *Handler) apiJobShow(c echo.Context) error {
	job, err := h.job(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, jobView(job))
}

func (h *Handler) job(c echo.Context) (bulkreplay.Job, error) {
	id, err := jobID(c)
	if err != nil {
		return bulkreplay.Job{}, err
	}
	if h.deps.DB == nil {
		return bulkreplay.Job{}, echo.NewHTTPError(http.StatusServiceUnavailable, "Actions are unavailable: this console has no database.")
	}
	job, err := bulkreplay.Get(c.Request().Context(), h.deps.DB, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return job, echo.NewHTTPError(http.StatusNotFound, "No such replay job.")
	}
	return job, err
}

func jobID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, echo.NewHTTPError(http.StatusNotFound, "No such replay job.")
	}
	return id, nil
}
