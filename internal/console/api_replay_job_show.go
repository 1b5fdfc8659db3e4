package console

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
)

// apiReplayJobShow is GET /api/replay-jobs/:id: the job with the outcomes
// of its replays (delivered, dead again, pending), as the Replays page
// shows them.
func (h *Handler) apiReplayJobShow(c echo.Context) error {
	job, err := h.job(c)
	if err != nil {
		return err
	}
	counts, err := countOutcomes(c.Request().Context(), queries.New(h.deps.DB), []uuid.UUID{job.ID})
	if err != nil {
		return err
	}
	v := jobView(job)
	n := counts[job.ID]
	v.Delivered, v.DeadAgain, v.Pending = n.Delivered, n.DeadAgain, n.Pending
	return c.JSON(http.StatusOK, v)
}
