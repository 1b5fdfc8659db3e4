package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/bulkreplay"
)

// EstimateResponse answers POST /api/replay-jobs/estimate.
type EstimateResponse struct {
	Estimate int64 `json:"estimate"`
	// AtLeast: counting stopped at bulkreplay.MaxCounted.
	AtLeast bool `json:"at_least"`
	// About: Estimate is the planner's estimate, above
	// bulkreplay.MaxCounted, not a count.
	About bool `json:"about"`
}

// apiReplayJobEstimate is POST /api/replay-jobs/estimate {filter}:
// action.Service.Estimate. It changes nothing, but it is an operator's
// question before starting a job.
func (h *Handler) apiReplayJobEstimate(c echo.Context) error {
	var body struct {
		Filter bulkreplay.Filter `json:"filter"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	n, err := h.actions.Estimate(c.Request().Context(), h.deps.DB, actor(c), body.Filter)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, EstimateResponse{Estimate: n.N, AtLeast: n.AtLeast, About: n.About})
}
