package console

import (
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
)

// replayJobCancel is a job's Cancel button: action.Service.CancelJob; it
// answers with the jobs table (a job that is no longer running shows as
// it is).
func (h *Handler) replayJobCancel(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return err
	}
	err = h.actions.CancelJob(c.Request().Context(), h.deps.DB, actor(c), action.JobCancelInput{JobID: id, RequestID: rid})
	if err != nil && panelMessage(err) == "" {
		return err
	}
	return h.replayJobsList(c)
}
