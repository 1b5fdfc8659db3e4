package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/inbox"
)

// inboxReceivePath is the route of the signed webhook receiver.
const inboxReceivePath = "/inbox/:source"

// DefaultInboxMaxBody is the largest request body POST /inbox/:source
// reads when Deps.InboxMaxBody is 0.
const DefaultInboxMaxBody = 1 << 20

// inboxMaxBody is the largest body POST /inbox/:source reads.
func (h *Handler) inboxMaxBody() int64 {
	if h.deps.InboxMaxBody <= 0 {
		return DefaultInboxMaxBody
	}
	return h.deps.InboxMaxBody
}

// inboxReadTimeout bounds how long reading one event's body may take.
const inboxReadTimeout = 30 * time.Second

// inboxReceive is POST /inbox/:source, the signed webhook receiver. Its
// contract with senders is docs/inbox.md. Every answer is JSON: senders are
// programs. Nothing is stored unless the answer is 2xx or a 500 for a
// failed handler (the failure is recorded).
func (h *Handler) inboxReceive(c echo.Context) error {
	source := c.Param("source")
	if h.deps.Inbox == nil {
		return inboxAnswer(c, http.StatusNotFound, "error", "unknown source")
	}
	limit := h.inboxMaxBody()
	req := c.Request()
	if req.ContentLength > limit {
		return inboxAnswer(c, http.StatusRequestEntityTooLarge, "error", fmt.Sprintf("body larger than %d bytes", limit))
	}
	// A sender that dribbles its body must not hold a connection forever.
	// Where the writer cannot take a deadline (tests' recorders), the
	// server's own timeouts are all there is.
	_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(inboxReadTimeout))
	body, err := readBody(req, limit)
	if err != nil {
		return inboxAnswer(c, http.StatusBadRequest, "error", "could not read the body")
	}
	if int64(len(body)) > limit {
		return inboxAnswer(c, http.StatusRequestEntityTooLarge, "error", fmt.Sprintf("body larger than %d bytes", limit))
	}
	res, err := h.deps.Inbox.Accept(req.Context(), source, req.Header, body)
	if err == nil {
		if answer, ok := outcomeAnswers[res.Outcome]; ok {
			return c.JSONBlob(http.StatusOK, answer)
		}
		return inboxAnswer(c, http.StatusOK, "status", string(res.Outcome))
	}
	status, message := inboxStatus(res, err)
	if status >= 500 || errors.Is(err, inbox.ErrHandler) {
		h.deps.Logger.WarnContext(req.Context(), "inbox event not applied",
			slog.String("source", source), slog.Int("status", status), slog.Any("error", err))
	}
	if status == http.StatusAccepted {
		return inboxAnswer(c, status, "status", message)
	}
	return inboxAnswer(c, status, "error", message)
}

// readBody reads at most limit+1 bytes of req's body. A body of announced
// length is read into a buffer of that size: io.ReadAll would grow its
// buffer from 512 bytes, copying as it goes, for every event.
func readBody(req *http.Request, limit int64) ([]byte, error) {
	r := io.LimitReader(req.Body, limit+1)
	if req.ContentLength < 0 || req.ContentLength > limit {
		return io.ReadAll(r)
	}
	// One byte more than announced, to see the end of the body.
	body := make([]byte, req.ContentLength+1)
	n, err := io.ReadFull(r, body)
	switch {
	case err == nil: // longer than announced (a reader in a test): read on
		rest, err := io.ReadAll(r)
		return append(body, rest...), err
	case int64(n) == req.ContentLength && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return body[:n], nil
	}
	return nil, err // shorter than announced: the connection broke
}

// inboxStatus maps Accept's error to the status and safe message of the
// contract (docs/inbox.md).
func inboxStatus(res inbox.Result, err error) (int, string) {
	switch {
	case errors.Is(err, inbox.ErrUnknownSource):
		return http.StatusNotFound, "unknown source"
	case errors.Is(err, inbox.ErrSignature):
		return http.StatusUnauthorized, "missing or invalid signature, or timestamp outside the tolerance"
	case errors.Is(err, inbox.ErrMalformed), errors.Is(err, inbox.ErrInvalid):
		return http.StatusBadRequest, "malformed event: want a JSON object with what the source's scheme and handler need"
	case errors.Is(err, inbox.ErrMisconfigured):
		return http.StatusServiceUnavailable, "source misconfigured on our side; retry later"
	case errors.Is(err, inbox.ErrTransient):
		return http.StatusServiceUnavailable, "busy; retry later"
	case errors.Is(err, inbox.ErrHandler) && res.Outcome == inbox.OutcomeParked:
		// Stored, and left for an operator: the sender need not retry.
		return http.StatusAccepted, string(inbox.OutcomeParked)
	case errors.Is(err, inbox.ErrHandler):
		return http.StatusInternalServerError, "event not applied; retry later"
	}
	return http.StatusServiceUnavailable, "temporarily unavailable; retry later"
}

// outcomeAnswers are the answers to accepted events, encoded once: nearly
// every request gets one of them.
var outcomeAnswers = func() map[inbox.Outcome][]byte {
	answers := map[inbox.Outcome][]byte{}
	for _, o := range []inbox.Outcome{inbox.OutcomeProcessed, inbox.OutcomeDuplicate, inbox.OutcomeStale, inbox.OutcomeHeld} {
		answers[o] = []byte(`{"status":"` + string(o) + `"}` + "\n")
	}
	return answers
}()

// inboxAnswer writes {"key":"value"}. It encodes only the string, not a
// map: every event is answered, and echo's c.JSON of a map (reflection,
// sorted keys, an encoder) was a measurable share of the receiver's CPU
// (BENCHMARKS.md, "The inbox against its floor").
func inboxAnswer(c echo.Context, status int, key, value string) error {
	k, err := json.Marshal(key)
	if err != nil {
		return err
	}
	v, err := json.Marshal(value)
	if err != nil {
		return err
	}
	b := make([]byte, 0, len(k)+len(v)+4)
	b = append(append(append(append(append(b, '{'), k...), ':'), v...), '}', '\n')
	return c.JSONBlob(status, b)
}
