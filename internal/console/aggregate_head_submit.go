package console

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/web/templates"
)

// aggregateHeadReplay is POST /aggregates/blocked/:id/replay, the blocked
// aggregates page's row button: action.Service.Replay of the dead head
// :id (redeliver, the same key), which unblocks its aggregate. The answer
// is the row's outcome; the list reloads (HX-Trigger blocked-changed).
func (h *Handler) aggregateHeadReplay(c echo.Context) error {
	return h.aggregateHead(c, func(in action.MessageInput) (string, error) {
		done, err := h.actions.Replay(c.Request().Context(), h.deps.DB, actor(c), action.ReplayInput{
			MessageID: in.MessageID, RequestID: in.RequestID, Mode: outbox.Redeliver, Reason: in.Reason})
		return "Replayed as message " + strconv.FormatInt(done.ID, 10) + ": the aggregate flows again.", err
	})
}

// aggregateHeadDiscard is POST /aggregates/blocked/:id/discard: the row's
// Discard button, action.Service.Discard of the dead head :id.
func (h *Handler) aggregateHeadDiscard(c echo.Context) error {
	return h.aggregateHead(c, func(in action.MessageInput) (string, error) {
		err := h.actions.Discard(c.Request().Context(), h.deps.DB, actor(c), in)
		return "Discarded (it can be restored from its page): the aggregate flows again.", err
	})
}

// aggregateHead runs do on the route's head message with the form's
// request id and reason, and answers the row's outcome: the notice, or
// the refusal's message in place (200, as the actions panel does).
func (h *Handler) aggregateHead(c echo.Context, do func(action.MessageInput) (string, error)) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err == nil {
		var notice string
		if notice, err = do(action.MessageInput{MessageID: id, RequestID: rid, Reason: c.FormValue("reason")}); err == nil {
			c.Response().Header().Set("HX-Trigger", "blocked-changed")
			return render(c, http.StatusOK, templates.BlockedHeadResult(templates.ActionOutcome{Notice: notice}))
		}
	}
	msg := panelMessage(err)
	if msg == "" {
		return err
	}
	return render(c, http.StatusOK, templates.BlockedHeadResult(templates.ActionOutcome{Error: msg}))
}
