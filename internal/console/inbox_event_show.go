package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/templates"
)

// maxShownPayload bounds the payload text the page shows.
const maxShownPayload = 64 << 10

// inboxEventShow shows one inbound event: status, attempts, handler error,
// the recorded headers and the payload, all as escaped text.
func (h *Handler) inboxEventShow(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return echo.NewHTTPError(http.StatusNotFound, "No such inbound event.")
	}
	r, err := queries.New(h.deps.DB).ConsoleInboxEventGet(c.Request().Context(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return echo.NewHTTPError(http.StatusNotFound, "No such inbound event.")
	}
	if err != nil {
		return err
	}
	headers := headerPairs(r.Headers)
	payload := pretty(r.Payload)
	shown := headers
	if !h.PayloadVisible(c) {
		// Inbound bodies and headers are as sensitive as outbound payloads.
		payload, shown = RedactedPayload, nil
	}
	e := templates.InboxEvent{
		ID: strconv.FormatInt(r.ID, 10), Source: r.Source, SourceHref: "/inbox?source=" + url.QueryEscape(r.Source),
		EventID: r.EventID, ReceivedAt: stamp(&r.ReceivedAt), ProcessedAt: stamp(r.ProcessedAt),
		Entity: entity(r.EntityKey, r.EntityVersion), Status: r.Status, Tone: inboxTone(r.Status),
		Attempts: strconv.Itoa(int(r.Attempts)), Error: deref(r.LastError), Fingerprint: deref(r.ErrorFingerprint),
		Signature: signature(headers), Headers: shown, Payload: payload,
	}
	if r.Status == "parked" {
		item, tracked, err := h.triageOf(c.Request().Context(), triage.InboxFailureGroup, map[string]string{"source": r.Source, "fingerprint": deref(r.ErrorFingerprint)})
		if err != nil {
			return err
		}
		if tracked {
			e.Triage = &item
		}
	}
	return render(c, http.StatusOK, templates.InboxEventPage(h.page("Inbound event "+r.EventID, templates.SectionInbox), e))
}

// headerPairs decodes the recorded headers, sorted by name.
func headerPairs(raw []byte) []templates.KeyValue {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := make([]templates.KeyValue, 0, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		out = append(out, templates.KeyValue{Key: k, Value: s})
	}
	slices.SortFunc(out, func(a, b templates.KeyValue) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// signature says what is known of the event's signature. The receiver
// refuses (and does not record) a request whose signature fails, so a
// recorded event with a signature header passed verification; events
// given to inbox.Receive directly by an embedding program carry none.
func signature(headers []templates.KeyValue) string {
	for _, h := range headers {
		switch strings.ToLower(h.Key) {
		case "webhook-signature", "stripe-signature":
			return "verified on receipt (" + strings.ToLower(h.Key) + ")"
		}
	}
	return "not recorded (received without a signed request)"
}

// pretty indents JSON for reading, truncated to maxShownPayload bytes.
func pretty(raw []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Reset()
		buf.Write(raw)
	}
	if buf.Len() > maxShownPayload {
		return buf.String()[:maxShownPayload] + "\n… (truncated)"
	}
	return buf.String()
}
