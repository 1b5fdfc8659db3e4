package console

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/web/templates"
)

// replaysShow is GET /replays: the new bulk replay form (operators) and the
// newest jobs with live progress. The query fills in the form (the
// fields of POST /replays/estimate: fingerprint, destination, topic,
// aggregate_type, aggregate_id, error_contains, created_from, created_to,
// mode, rate), so a
// dead-letter group or a filtered message list links to a bulk replay of
// what it shows; nothing runs before the operator estimates and confirms.
func (h *Handler) replaysShow(c echo.Context) error {
	jobs, err := h.replayJobs(c)
	if err != nil {
		return err
	}
	form, _, err := bulkForm(c)
	if err != nil {
		return err
	}
	form.RequestID, form.All, form.Reason = uuid.NewString(), false, ""
	v := templates.ReplaysView{CanOperate: current(c).Role.Allows(auth.Operator), Jobs: jobs, Form: form}
	return render(c, http.StatusOK, templates.ReplaysPage(h.page("Replays", templates.SectionDeadLetters), v))
}
