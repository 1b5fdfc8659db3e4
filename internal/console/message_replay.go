package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// Audit actions of the message actions.
const (
	actionReplay     = "message.replay"
	actionEditReplay = "message.edit_replay"
	actionDiscard    = "message.discard"
	actionRestore    = "message.restore"
)

// replayInput is one replay request, from the JSON API or a panel's form.
type replayInput struct {
	MessageID int64
	RequestID uuid.UUID
	Mode      outbox.ReplayMode
	Reason    string
	// Payload, if set, replaces the original's: edit and replay (admin).
	Payload json.RawMessage
}

// replay applies in with its audit row. Editing the payload needs the
// admin role; re-applying needs a reason (the engine refuses without).
func (h *Handler) replay(c echo.Context, in replayInput) (outbox.Replayed, error) {
	if p := current(c); in.Payload != nil && !p.Role.Allows(auth.Admin) {
		return outbox.Replayed{}, h.forbidden(c, p, auth.Admin, "Editing a payload before replaying needs the admin role.")
	}
	if in.Payload != nil && (!json.Valid(in.Payload) || len(in.Payload) > outbox.MaxPayloadBytes) {
		return outbox.Replayed{}, echo.NewHTTPError(http.StatusUnprocessableEntity,
			fmt.Sprintf("The edited payload must be valid JSON of at most %d bytes.", outbox.MaxPayloadBytes))
	}
	if in.Mode != outbox.Redeliver && in.Mode != outbox.Reapply {
		return outbox.Replayed{}, echo.NewHTTPError(http.StatusUnprocessableEntity, "The mode must be redeliver or reapply.")
	}
	action := actionReplay
	if in.Payload != nil {
		action = actionEditReplay
	}
	var done outbox.Replayed
	err := h.act(c, audit.Entry{Action: action, Target: "message " + strconv.FormatInt(in.MessageID, 10),
		Reason: in.Reason, RequestID: in.RequestID.String()},
		func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
			var before json.RawMessage
			if in.Payload != nil {
				var err error
				if before, err = originalPayload(ctx, tx, in.MessageID); err != nil {
					return false, err
				}
			}
			var err error
			done, err = outbox.Replay(ctx, tx, outbox.ReplayRequest{
				MessageID: in.MessageID, RequestID: in.RequestID, Mode: in.Mode,
				Actor: current(c).Name, Reason: in.Reason, Payload: in.Payload,
			})
			if err != nil || done.Existing {
				return true, err
			}
			if err := messagesChanged(ctx, tx, action, in.MessageID, done.ID); err != nil {
				return false, err
			}
			e.Detail, err = json.Marshal(replayDetail{Mode: in.Mode, ReplayID: done.ID, DeliveryKey: done.Key,
				OriginalPayload: before, Payload: in.Payload})
			return false, err
		})
	return done, refusal(err)
}

// replayDetail is the audit row's detail of a replay: an edit keeps both
// payloads, the original's and the one replayed.
type replayDetail struct {
	Mode            outbox.ReplayMode `json:"mode"`
	ReplayID        int64             `json:"replay_id"`
	DeliveryKey     uuid.UUID         `json:"delivery_key"`
	OriginalPayload json.RawMessage   `json:"original_payload,omitempty"`
	Payload         json.RawMessage   `json:"payload,omitempty"`
}

// originalPayload reads the original's payload for an edit's audit row. A
// dead message's payload never changes, so reading it before outbox.Replay
// locks the row is safe.
func originalPayload(ctx context.Context, tx pgx.Tx, id int64) (json.RawMessage, error) {
	m, err := queries.New(tx).ActionMessageGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %d", outbox.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read message %d: %w", id, err)
	}
	return m.Payload, nil
}

// discard archives a dead message (or restores a discarded one) with its
// audit row.
func (h *Handler) discard(c echo.Context, id int64, rid uuid.UUID, reason string, restore bool) error {
	action := actionDiscard
	if restore {
		action = actionRestore
	}
	err := h.act(c, audit.Entry{Action: action, Target: "message " + strconv.FormatInt(id, 10), Reason: reason, RequestID: rid.String()},
		func(ctx context.Context, tx pgx.Tx, _ *audit.Entry) (bool, error) {
			change := outbox.Discard
			if restore {
				change = outbox.Restore
			}
			if err := change(ctx, tx, id); err != nil {
				return false, err
			}
			return false, messagesChanged(ctx, tx, action, id)
		})
	return refusal(err)
}

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

// apiMessageReplay is POST /api/messages/:id/replay.
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
	done, err := h.replay(c, replayInput{MessageID: id, RequestID: rid, Mode: body.Mode, Reason: body.Reason, Payload: body.Payload})
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if done.Existing {
		status = http.StatusOK
	}
	return c.JSON(status, ReplayResponse{MessageID: id, ReplayID: done.ID, Mode: body.Mode, DeliveryKey: done.Key, Existing: done.Existing})
}

// actionBody is the JSON API's discard or restore request.
type actionBody struct {
	Reason    string `json:"reason"`
	RequestID string `json:"request_id"`
}

// MessageStateResponse is the JSON API's answer to a discard or restore.
type MessageStateResponse struct {
	MessageID int64  `json:"message_id"`
	State     string `json:"state"`
}

// apiMessageDiscard is POST /api/messages/:id/discard.
func (h *Handler) apiMessageDiscard(c echo.Context) error { return h.apiDiscard(c, false) }

// apiMessageRestore is POST /api/messages/:id/restore.
func (h *Handler) apiMessageRestore(c echo.Context) error { return h.apiDiscard(c, true) }

func (h *Handler) apiDiscard(c echo.Context, restore bool) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	var body actionBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	rid, err := requestID(c, body.RequestID)
	if err != nil {
		return err
	}
	if err := h.discard(c, id, rid, body.Reason, restore); err != nil {
		return err
	}
	state := "discarded"
	if restore {
		state = "dead"
	}
	return c.JSON(http.StatusOK, MessageStateResponse{MessageID: id, State: state})
}

// decodeJSON decodes the request's JSON body into v; an empty body leaves v
// as it is.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return echo.NewHTTPError(http.StatusBadRequest, "The body must be a JSON object: "+err.Error())
	}
	return nil
}
