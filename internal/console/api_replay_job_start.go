package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
)

// JobSpec is a bulk replay job to start, as the JSON API takes it.
type JobSpec struct {
	Filter bulkreplay.Filter `json:"filter"`
	// All confirms an empty filter: every dead message.
	All           bool              `json:"all"`
	Mode          outbox.ReplayMode `json:"mode"`
	Reason        string            `json:"reason"`
	RatePerSecond int               `json:"rate_per_second"`
	// Estimate is accepted and ignored: the job records the server's
	// own count, made when it starts.
	Estimate  *int64 `json:"estimate,omitempty"`
	RequestID string `json:"request_id"`
}

// apiReplayJobStart is POST /api/replay-jobs: action.Service.StartJob.
func (h *Handler) apiReplayJobStart(c echo.Context) error {
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
	job, err := h.actions.StartJob(c.Request().Context(), h.deps.DB, actor(c), action.JobStartInput{
		Filter: s.Filter, All: s.All, Mode: s.Mode, Reason: s.Reason, RatePerSecond: s.RatePerSecond, RequestID: rid})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, jobView(job))
}
