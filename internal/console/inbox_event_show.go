package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/templates"
)

// maxShownPayload bounds the payload text the page shows.
const maxShownPayload = 64 << 10

// inboxEventShow shows one inbound event: status, every attempt, what
// its handler enqueued, its duplicate deliveries, the recorded headers and
// the payload, all as escaped text; operators can retry a failed or parked
// one.
func (h *Handler) inboxEventShow(c echo.Context) error {
	e, err := h.inboxEventView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.InboxEventPage(h.page("Inbound event "+e.EventID, templates.SectionInbox), e))
}

// inboxEventLive is GET /inbox/events/:id/live, the page's live region.
func (h *Handler) inboxEventLive(c echo.Context) error {
	e, err := h.inboxEventView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.InboxEventLive(e))
}

func inboxEventID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, echo.NewHTTPError(http.StatusNotFound, "No such inbound event.")
	}
	return id, nil
}

// inboxEventView reads the route's event and what its page shows.
func (h *Handler) inboxEventView(c echo.Context) (templates.InboxEvent, error) {
	id, err := inboxEventID(c)
	if err != nil {
		return templates.InboxEvent{}, err
	}
	if err := h.readDB(); err != nil {
		return templates.InboxEvent{}, err
	}
	ctx, q := c.Request().Context(), queries.New(h.deps.DB)
	r, err := q.InboxEventGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return templates.InboxEvent{}, echo.NewHTTPError(http.StatusNotFound, "No such inbound event.")
	}
	if err != nil {
		return templates.InboxEvent{}, err
	}
	headers := headerPairs(r.Headers)
	payload := pretty(r.Payload)
	shown, hidden := headers, !h.PayloadVisible(c)
	if hidden {
		// Inbound bodies and headers are as sensitive as outbound payloads.
		payload, shown = RedactedPayload, nil
	}
	operator := current(c).Role.Allows(auth.Operator)
	e := templates.InboxEvent{
		ID: strconv.FormatInt(r.ID, 10), Source: r.Source, SourceHref: "/inbox?source=" + url.QueryEscape(r.Source),
		EventID: r.EventID, ReceivedAt: stamp(&r.ReceivedAt), ProcessedAt: stamp(r.ProcessedAt),
		Entity: entity(r.EntityKey, r.EntityVersion), Status: r.Status, Tone: inboxTone(r.Status),
		Error: deref(r.LastError), Fingerprint: deref(r.ErrorFingerprint),
		Signature: signature(headers), Headers: shown, HeadersHidden: hidden, Payload: payload, CanOperate: operator,
	}
	e.CanRetry = operator && e.Retryable()
	if e.CanRetry {
		e.RetryRequestID = uuid.NewString()
	}
	if h.deps.Inbox != nil {
		e.Handler = h.deps.Inbox.HandlerOf(r.Source)
	}
	if err := h.inboxEventFacts(c, q, r, &e); err != nil {
		return templates.InboxEvent{}, err
	}
	if r.Status == "parked" {
		item, tracked, err := h.triageOf(ctx, triage.InboxFailureGroup, map[string]string{"source": r.Source, "fingerprint": deref(r.ErrorFingerprint)})
		if err != nil {
			return templates.InboxEvent{}, err
		}
		if tracked {
			e.Triage = &item
		}
	}
	return e, nil
}

// duplicatesShown is how many of an event's newest duplicate deliveries
// its page lists.
const duplicatesShown = 20

// inboxEventFacts fills the event's attempts, the messages its handler
// enqueued and its duplicate deliveries.
func (h *Handler) inboxEventFacts(c echo.Context, q *queries.Queries, r queries.SwitchyardInboxEvent, e *templates.InboxEvent) error {
	ctx := c.Request().Context()
	attempts, err := q.InboxEventAttemptList(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("read the attempts of inbound event %d: %w", r.ID, err)
	}
	e.AttemptList = inboxAttempts(r, attempts)
	total := max(lastAttempt(e.AttemptList), realAttempts(r.Status, r.Attempts))
	e.Attempts = strconv.Itoa(total)
	e.AttemptsNote = attemptsNote(r.Status, total, e.AttemptList)
	messages, err := q.InboxEventMessageList(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("read the messages of inbound event %d: %w", r.ID, err)
	}
	for _, m := range messages {
		e.Messages = append(e.Messages, templates.InboxMessage{ID: m.ID, Topic: m.Topic, Destination: m.Destination, State: m.State, CreatedAt: stamp(&m.CreatedAt)})
	}
	dups, err := q.InboxEventDuplicateList(ctx, queries.InboxEventDuplicateListParams{Source: r.Source, EventID: r.EventID, MaxRows: duplicatesShown})
	if err != nil {
		return fmt.Errorf("read the duplicates of inbound event %d: %w", r.ID, err)
	}
	e.Duplicates = "0"
	for _, d := range dups {
		e.Duplicates = strconv.FormatInt(d.Total, 10)
		e.DuplicateTimes = append(e.DuplicateTimes, stamp(&d.ReceivedAt))
	}
	return nil
}

// inboxAttempts is an event's attempts as its page lists them: the
// recorded ones (failures and operator retries), and, for an event that a
// delivery processed, that delivery's successful attempt, which the
// receive path does not record as a row (its time is processed_at).
func inboxAttempts(r queries.SwitchyardInboxEvent, rows []queries.InboxEventAttemptListRow) []templates.InboxAttempt {
	out := make([]templates.InboxAttempt, 0, len(rows)+1)
	processed := false
	for _, a := range rows {
		by := "delivery"
		if a.Actor != "" {
			by = "retry by " + a.Actor
		}
		processed = processed || a.Outcome == "processed"
		out = append(out, templates.InboxAttempt{N: strconv.Itoa(int(a.Attempt)), At: stamp(&a.At), Outcome: a.Outcome,
			Tone: inboxTone(a.Outcome), Error: deref(a.Error), By: by})
	}
	if r.Status == "processed" && !processed {
		// After every failed attempt, also those not recorded as rows.
		n := max(len(out), lastAttempt(out), int(r.Attempts)) + 1
		out = append(out, templates.InboxAttempt{N: strconv.Itoa(n), At: stamp(r.ProcessedAt), Outcome: "processed", Tone: "ok", By: "delivery"})
	}
	return out
}

// lastAttempt is the number of the last attempt listed, 0 if none.
func lastAttempt(list []templates.InboxAttempt) int {
	if len(list) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(list[len(list)-1].N)
	return n
}

// attemptsNote says what an event's list of attempts cannot show, true in
// every combination of its status, its count of attempts (total) and the
// attempts listed: attempts made before they were recorded one by one
// (only the event's count knows them), and a settlement by the entity's
// version, which runs no handler and (on a delivery) records no attempt.
// When nothing is listed it says why; otherwise "" when all is shown.
func attemptsNote(status string, total int, listed []templates.InboxAttempt) string {
	var parts []string
	switch unlisted := total - len(listed); {
	case unlisted > 0 && len(listed) == 0:
		parts = append(parts, fmt.Sprintf("The handler ran %s on this event and failed; those attempts were made before attempts were recorded one by one, so only their number and the event's last error are known.", times(unlisted)))
	case unlisted == 1:
		parts = append(parts, "1 earlier attempt is not listed: it was made before attempts were recorded one by one.")
	case unlisted > 1:
		parts = append(parts, fmt.Sprintf("%d earlier attempts are not listed: they were made before attempts were recorded one by one.", unlisted))
	}
	settledLast := len(listed) > 0 && listed[len(listed)-1].Outcome == status
	switch {
	case status == "stale" && !settledLast && total == 0:
		parts = append(parts, "The handler did not run on this event: its entity already had this version or a newer one applied, so the event was settled as stale.")
	case status == "stale" && !settledLast:
		parts = append(parts, "Then a delivery settled the event as stale, without running the handler: its entity had this version or a newer one applied.")
	case status == "held" && !settledLast && total == 0:
		parts = append(parts, "The handler has not run on this event: it is held until its entity's previous version is applied.")
	case status == "held" && !settledLast:
		parts = append(parts, "Then a delivery held the event, without running the handler, until its entity's previous version is applied.")
	}
	if len(parts) == 0 && len(listed) == 0 {
		return "No attempt of the handler is recorded for this event."
	}
	return strings.Join(parts, " ")
}

// times is "once", "twice" or "n times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return strconv.Itoa(n) + " times"
}

// realAttempts is how many times the handler ran on an event, from its
// row alone: its failed attempts, and the successful one of a processed
// event.
func realAttempts(status string, failed int32) int {
	if status == "processed" {
		return int(failed) + 1
	}
	return int(failed)
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
