package console

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/outbox"
)

// replayBody is the JSON API's replay request.
type replayBody struct {
	Mode      outbox.ReplayMode `json:"mode"`
	Reason    string            `json:"reason"`
	Payload   json.RawMessage   `json:"payload,omitempty"`
	RequestID string            `json:"request_id"`
}

// ReplayResponse is the JSON API's answer to a replay.
type ReplayResponse struct {
	MessageID   int64             `json:"message_id"`
	ReplayID    int64             `json:"replay_id"`
	Mode        outbox.ReplayMode `json:"mode"`
	DeliveryKey uuid.UUID         `json:"delivery_key"`
	// Existing: this request id had been applied before; nothing new.
	Existing bool `json:"existing"`
}

// apiMessageReplay is POST /api/messages/:id/replay: action.Service.Replay
// (with a payload: edit and replay).
func (h *Handler) apiMessageReplay(c echo.Context) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	var body replayBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	rid, err := requestID(c, body.RequestID)
	if err != nil {
		return err
	}
	if body.Mode == "" {
		body.Mode = outbox.Redeliver
	}
	if bytes.Equal(bytes.TrimSpace(body.Payload), []byte("null")) {
		body.Payload = nil
	}
	done, err := h.actions.Replay(c.Request().Context(), h.deps.DB, actor(c), action.ReplayInput{
		MessageID: id, RequestID: rid, Mode: body.Mode, Reason: body.Reason, Payload: body.Payload})
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if done.Existing {
		status = http.StatusOK
	}
	return c.JSON(status, ReplayResponse{MessageID: id, ReplayID: done.ID, Mode: body.Mode, DeliveryKey: done.Key, Existing: done.Existing})
}
