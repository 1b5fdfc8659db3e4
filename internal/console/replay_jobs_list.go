package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/web/templates"
)

// replayJobsList is GET /replays/jobs: the jobs table alone, which the
// Replays page reloads on every replay_job change.
func (h *Handler) replayJobsList(c echo.Context) error {
	jobs, err := h.replayJobs(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.ReplayJobsTable(jobs))
}
