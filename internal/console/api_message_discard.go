package console

import (
	"net/http"

	"github.com/google/uuid"
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

// decodeActionBody reads a discard's, restore's or cancel's body and its
// request id.
func decodeActionBody(c echo.Context) (actionBody, uuid.UUID, error) {
	var body actionBody
	if err := decodeJSON(c, &body); err != nil {
		return body, uuid.Nil, err
	}
	rid, err := requestID(c, body.RequestID)
	return body, rid, err
}

// apiMessageDiscard is POST /api/messages/:id/discard: action.Service.Discard.
func (h *Handler) apiMessageDiscard(c echo.Context) error {
	return h.apiMessageState(c, h.actions.Discard, "discarded")
}

// apiMessageState runs do (a discard or restore) as the JSON body asks
// and answers with the message's new state.
func (h *Handler) apiMessageState(c echo.Context, do messageStateAction, state string) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	body, rid, err := decodeActionBody(c)
	if err != nil {
		return err
	}
	if err := do(c.Request().Context(), h.deps.DB, actor(c), action.MessageInput{MessageID: id, RequestID: rid, Reason: body.Reason}); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, MessageStateResponse{MessageID: id, State: state})
}
