package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/bulkreplay"
)

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
	// Delivered, DeadAgain and Pending are what became of the replays so
	// far, as the Replays page shows them: they settle after the job is
	// done. Zero in the answer of a start.
	Delivered  int64      `json:"delivered"`
	DeadAgain  int64      `json:"dead_again"`
	Pending    int64      `json:"pending"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

func jobView(j bulkreplay.Job) JobView {
	return JobView{ID: j.ID, State: j.State, Filter: j.Filter, Mode: j.Mode, Actor: j.Actor, Reason: j.Reason,
		RatePerSecond: j.RatePerSec, Estimate: j.Estimate, Replayed: j.Replayed, Skipped: j.Skipped,
		CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt}
}

// job reads the job of the route's :id.
func (h *Handler) job(c echo.Context) (bulkreplay.Job, error) {
	id, err := jobID(c)
	if err != nil {
		return bulkreplay.Job{}, err
	}
	if err := h.readDB(); err != nil {
		return bulkreplay.Job{}, err
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
