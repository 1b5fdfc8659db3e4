package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// payloadShown is how much of a payload the detail page shows; the rest is
// in the raw download.
const payloadShown = 64 << 10

// detailListLen bounds the attempts, replays and sibling lists of the
// detail page.
const (
	maxAttemptsShown = 200
	maxReplaysShown  = 50
	maxSiblingsShown = 10
)

// messageShow serves GET /messages/:id.
func (h *Handler) messageShow(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return errNotFound("Message")
	}
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	m, err := q.ConsoleMessageGet(ctx, id)
	if err != nil {
		return notFound(err, "Message")
	}
	d := messageDetail(m)
	if err := messageStatus(ctx, q, &d); err != nil {
		return err
	}
	if !h.PayloadVisible(c) {
		d.Payload, d.PayloadTruncate, d.PayloadHidden = RedactedPayload, false, true
	}
	d.CanDownload = current(c).Role.Allows(auth.Operator)
	if err := h.messageHistory(ctx, q, m, &d); err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.MessageShow(h.page(fmt.Sprintf("Message %d", id), templates.SectionMessages), d))
}

// messageDetail maps the row's own fields.
func messageDetail(m queries.SwitchyardOutbox) templates.MessageDetail {
	d := templates.MessageDetail{
		Row: templates.MessageRow{
			ID: m.ID, MessageID: m.MessageID.String(), Topic: m.Topic, Destination: m.Destination,
			AggregateType: m.AggregateType, AggregateID: m.AggregateID, State: m.State,
			Attempts: m.Attempts, CreatedAt: m.CreatedAt,
		},
		MaxAttempts: "the destination's limit", NextAttemptAt: m.NextAttemptAt, FinishedAt: m.FinishedAt,
		LeaseVersion: m.LeaseVersion, PayloadBytes: len(m.Payload), Headers: headerList(m.Headers),
	}
	if m.LeasedUntil != nil && m.LeasedUntil.After(d.NextAttemptAt) {
		// An unordered message in flight: tried again when its lease
		// runs out, unless its delivery finishes first.
		d.NextAttemptAt = *m.LeasedUntil
	}
	if m.AggregateSeq != nil {
		d.AggregateSeq = *m.AggregateSeq
	}
	if m.MaxAttempts != nil {
		d.MaxAttempts = strconv.Itoa(int(*m.MaxAttempts))
	}
	if m.ReplayOf != nil {
		d.Row.ReplayOf = *m.ReplayOf
	}
	if m.LeaseOwner != nil {
		d.LeaseOwner = *m.LeaseOwner
	}
	if m.LastError != nil {
		d.LastError = *m.LastError
	}
	if m.ErrorFingerprint != nil {
		d.Fingerprint = *m.ErrorFingerprint
	}
	d.Payload, d.PayloadTruncate = prettyPayload(m.Payload)
	return d
}

// messageHistory adds the attempts, the replays and the aggregate.
func (h *Handler) messageHistory(ctx context.Context, q *queries.Queries, m queries.SwitchyardOutbox, d *templates.MessageDetail) error {
	attempts, err := q.ConsoleMessageAttemptList(ctx, queries.ConsoleMessageAttemptListParams{MessageID: m.ID, MaxRows: maxAttemptsShown})
	if err != nil {
		return fmt.Errorf("read attempts of message %d: %w", m.ID, err)
	}
	for _, a := range attempts {
		d.Attempts = append(d.Attempts, attemptView(a))
	}
	if d.Replays, err = messageReplays(ctx, q, m.ID); err != nil {
		return err
	}
	if m.AggregateID == "" {
		return nil
	}
	agg := messageFilter{}
	agg.form.AggregateType, agg.form.AggregateID = m.AggregateType, m.AggregateID
	agg.params.AggregateType, agg.params.AggregateID = &m.AggregateType, &m.AggregateID
	agg.params.Cursor, agg.params.Ceiling, agg.params.MaxRows = 1<<63-1, 1<<63-1, maxSiblingsShown
	siblings, err := messagesOlder(ctx, q, agg.params)
	if err != nil {
		return err
	}
	d.Siblings = messageRows(siblings)
	d.AggregateURL = "/messages" + agg.query()
	d.InboxURL = "/inbox?" + url.Values{"entity_key": {m.AggregateID}}.Encode()
	return nil
}

func attemptView(a queries.SwitchyardOutboxAttemptLog) templates.Attempt {
	v := templates.Attempt{
		Number: a.Attempt, Worker: a.Worker, LeaseVersion: a.LeaseVersion, StartedAt: a.StartedAt,
		Outcome: a.Outcome, Applied: a.Applied, DurationMs: a.DurationMs,
	}
	if a.StatusCode != nil {
		v.StatusCode = strconv.Itoa(int(*a.StatusCode))
	}
	if a.Error != nil {
		v.Error = shorten(*a.Error, 1000)
	}
	if a.Response != nil {
		v.Response = shorten(*a.Response, 1000)
	}
	return v
}

// prettyPayload indents a JSON payload and cuts it at payloadShown bytes.
// It is shown as text: templ escapes it.
func prettyPayload(raw []byte) (string, bool) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	s := buf.String()
	if len(s) <= payloadShown {
		return s, false
	}
	return shorten(s, payloadShown), true
}

// headerList lists a headers object's entries by name; each value is its
// JSON text.
func headerList(raw []byte) []templates.Header {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	out := make([]templates.Header, 0, len(m))
	for k, v := range m {
		value := string(v)
		var s string
		if json.Unmarshal(v, &s) == nil {
			value = s
		}
		out = append(out, templates.Header{Name: k, Value: shorten(value, 2000)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
