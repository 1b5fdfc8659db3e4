package console

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Request body limits beyond httpserver.FormMaxBody, which every other
// route takes (its forms hold a name, a password, a reason, a filter).
const (
	// APIMaxBody is the largest body the JSON API (/api/...) reads: an
	// edited payload of outbox.MaxPayloadBytes and its reason.
	APIMaxBody = outbox.MaxPayloadBytes + 64<<10
	// EditFormMaxBody is the largest body of the edit-and-replay form: the
	// payload URL-encoded (up to three bytes for one) and the form's
	// other fields.
	EditFormMaxBody = 3*outbox.MaxPayloadBytes + httpserver.FormMaxBody
)

// BodyLimit is httpserver.Config.BodyLimit for the console's routes: what
// each route reads, never more (the inbox its own --inbox-max-body).
func (h *Handler) BodyLimit(c echo.Context) int64 {
	switch path := c.Path(); {
	case path == "/inbox/:source":
		return h.inboxMaxBody()
	case path == "/messages/:id/actions/edit-preview", path == "/messages/:id/actions/edit-replay":
		return EditFormMaxBody
	case strings.HasPrefix(path, "/api/"):
		return APIMaxBody
	}
	return httpserver.FormMaxBody
}

// Streaming is httpserver.Config.Streaming for the console's routes: the
// live change stream, which bounds each write itself (internal/sse).
func Streaming(c echo.Context) bool {
	return c.Path() == "/events" && c.Request().Method == http.MethodGet
}

// ForPrograms is httpserver.Config.ForPrograms for the console's routes:
// the inbox's receiver, whose every answer is JSON for the sender.
func ForPrograms(c echo.Context) bool {
	return c.Path() == inboxReceivePath
}
