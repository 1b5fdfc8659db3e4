package console

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/web/templates"
)

// replayJobStart is the new job form's confirm button:
// action.Service.StartJob, then a fresh form, and the jobs table told to
// reload.
func (h *Handler) replayJobStart(c echo.Context) error {
	f, in, err := bulkForm(c)
	var rid uuid.UUID
	if err == nil {
		rid, err = requestID(c, f.RequestID)
	}
	if err == nil {
		in.RequestID = rid
		_, err = h.actions.StartJob(c.Request().Context(), h.deps.DB, actor(c), in)
	}
	if err != nil {
		return bulkFormRefused(c, f, err)
	}
	c.Response().Header().Set("HX-Trigger", "replay-jobs-changed")
	return render(c, http.StatusOK, templates.BulkReplayForm(templates.BulkForm{
		Mode: string(outbox.Redeliver), Rate: defaultRate, RequestID: uuid.NewString(),
	}))
}
