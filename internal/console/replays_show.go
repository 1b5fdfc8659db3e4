package console

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/web/templates"
)

// replaysShow is GET /replays: the new bulk replay form (operators) and the
// newest jobs with live progress.
func (h *Handler) replaysShow(c echo.Context) error {
	jobs, err := h.replayJobs(c)
	if err != nil {
		return err
	}
	v := templates.ReplaysView{CanOperate: current(c).Role.Allows(auth.Operator), Jobs: jobs,
		Form: templates.BulkForm{Mode: string(outbox.Redeliver), Rate: defaultRate, RequestID: uuid.NewString()}}
	return render(c, http.StatusOK, templates.ReplaysPage(h.page("Replays", templates.SectionDeadLetters), v))
}
