package console

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// apiReplayJobShow is GET /api/replay-jobs/:id.
func (h *Handler) apiReplayJobShow(c echo.Context) error {
	job, err := h.job(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, jobView(job))
}
