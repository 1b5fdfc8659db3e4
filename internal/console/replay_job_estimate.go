package console

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/web/templates"
)

// replayJobEstimate is the new job form's Estimate button: the count the
// filter matches (action.Service.Estimate) and the confirm button, once
// the form passes what starting the job checks (action.CheckJobStart).
// It changes nothing.
func (h *Handler) replayJobEstimate(c echo.Context) error {
	f, in, err := bulkForm(c)
	if _, err := uuid.Parse(f.RequestID); err != nil {
		f.RequestID = uuid.NewString()
	}
	if err != nil {
		return bulkFormRefused(c, f, err)
	}
	if err := action.CheckJobStart(actor(c), in); err != nil {
		return bulkFormRefused(c, f, err)
	}
	n, err := h.actions.Estimate(c.Request().Context(), h.deps.DB, actor(c), in.Filter)
	if err != nil {
		return bulkFormRefused(c, f, err)
	}
	f.Estimated, f.Estimate, f.AtLeast, f.About = true, n.N, n.AtLeast, n.About
	return render(c, http.StatusOK, templates.BulkReplayForm(f))
}
