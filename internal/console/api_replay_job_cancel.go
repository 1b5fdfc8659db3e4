package console

import (
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
)

// apiReplayJobCancel is POST /api/replay-jobs/:id/cancel:
// action.Service.CancelJob; it answers with the job.
func (h *Handler) apiReplayJobCancel(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	body, rid, err := decodeActionBody(c)
	if err != nil {
		return err
	}
	err = h.actions.CancelJob(c.Request().Context(), h.deps.DB, actor(c), action.JobCancelInput{JobID: id, RequestID: rid, Reason: body.Reason})
	if err != nil {
		return err
	}
	return h.apiReplayJobShow(c)
}
