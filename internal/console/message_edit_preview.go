package console

import (
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/web/templates"
)

// messageEditPreview validates an edited payload and shows its diff
// against the original with the confirm button; it changes nothing.
func (h *Handler) messageEditPreview(c echo.Context) error {
	m, err := h.messageActions(c)
	if err != nil {
		return err
	}
	edited := []byte(c.FormValue("payload"))
	if !json.Valid(edited) {
		return render(c, http.StatusOK, templates.ActionError("The edited payload is not valid JSON: correct it and show the diff again."))
	}
	mode := c.FormValue("mode")
	if mode != string(outbox.Redeliver) && mode != string(outbox.Reapply) {
		mode = string(outbox.Reapply)
	}
	if mode == string(outbox.Reapply) && c.FormValue("reason") == "" {
		return render(c, http.StatusOK, templates.ActionError("Re-applying needs a reason: say why the edited payload is replayed."))
	}
	in := action.ReplayInput{MessageID: m.ID, Mode: outbox.ReplayMode(mode), Reason: c.FormValue("reason"), Payload: edited}
	if err := action.CheckReplay(actor(c), in); err != nil {
		return previewRefused(c, err)
	}
	// The confirm button's request id is made here, with the diff it
	// confirms: a double click sends it twice, a new preview gets another.
	diff, changed := lineDiff(m.Payload, prettyJSON(edited))
	return render(c, http.StatusOK, templates.EditPreviewFragment(templates.EditPreview{
		ID: m.ID, RequestID: uuid.NewString(), Payload: string(compactJSON(edited)), Reason: c.FormValue("reason"),
		Mode: mode, Diff: diff, Changed: changed,
	}))
}

// previewRefused shows an edit's refusal in place of the diff.
func previewRefused(c echo.Context, err error) error {
	msg := panelMessage(err)
	if msg == "" {
		return err
	}
	return render(c, http.StatusOK, templates.ActionError(msg))
}
