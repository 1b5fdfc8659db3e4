package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
)

// actionBody is the JSON API's discard, restore or cancel request.
type actionBody struct {
	Reason    string `json:"reason"`
	RequestID string `json:"request_id"`
}

// MessageStateResponse is the JSON API's answer to a discard or restore.
type MessageStateResponse struct {
	MessageID int64  `json:"message_id"`
	State     string `json:"state"`
}

// messageInput reads a discard's or restore's request: the message, the
// request id and the reason.
func messageInput(c echo.Context) (action.MessageInput, error) {
	id, err := messageID(c)
	if err != nil {
		return action.MessageInput{}, err
	}
	var body actionBody
	if err := decodeJSON(c, &body); err != nil {
		return action.MessageInput{}, err
	}
	rid, err := requestID(c, body.RequestID)
	if err != nil {
		return action.MessageInput{}, err
	}
	return action.MessageInput{MessageID: id, RequestID: rid, Reason: body.Reason}, nil
}

// apiMessageDiscard is POST /api/messages/:id/discard: action.Service.Discard.
func (h *Handler) apiMessageDiscard(c echo.Context) error {
	in, err := messageInput(c)
	if err != nil {
		return err
	}
	if err := h.actions.Discard(c.Request().Context(), h.deps.DB, actor(c), in); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, MessageStateResponse{MessageID: in.MessageID, State: "discarded"})
}
