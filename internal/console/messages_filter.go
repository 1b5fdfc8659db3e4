package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// pageSize is how many rows a list page shows.
const pageSize = 50

// datetimeLocal is the value format of <input type="datetime-local">; the
// console reads and shows it as UTC.
const datetimeLocal = "2006-01-02T15:04"

// datetimeLocalSeconds is datetime-local with seconds (parsing also takes
// a fraction after them).
const datetimeLocalSeconds = "2006-01-02T15:04:05"

// messageFilter is the message list's filters as read from the URL, both as
// typed (form) and as query parameters (params, NULL meaning any).
type messageFilter struct {
	form   templates.MessageFilter
	params queries.ConsoleMessagesListOlderParams
	// id is set when the id filter names one message: the list is that
	// message, if it passes the other filters; 0 with idGiven means it
	// names none.
	id      int64
	idGiven bool
}

// parseMessageFilter reads the filters from the query string. A value it
// cannot read is a 400 that says which.
func parseMessageFilter(ctx context.Context, q *queries.Queries, v url.Values) (messageFilter, error) {
	f := messageFilter{form: templates.MessageFilter{
		State: v.Get("state"), Topic: trimmed(v, "topic"), Destination: trimmed(v, "destination"),
		AggregateType: trimmed(v, "aggregate_type"), AggregateID: trimmed(v, "aggregate_id"),
		ID: trimmed(v, "id"), Error: trimmed(v, "error"), From: trimmed(v, "from"), To: trimmed(v, "to"),
		Stage: v.Get("stage"), LeasedBy: trimmed(v, "leased_by"),
	}}
	switch f.form.State {
	case "", "pending", "delivered", "dead", "replayed", "discarded":
	default:
		return f, echo.NewHTTPError(http.StatusBadRequest, "Unknown state: choose pending, delivered, dead, replayed or discarded.")
	}
	switch f.form.Stage {
	case "", "queued", "in_flight", "retrying":
	default:
		return f, echo.NewHTTPError(http.StatusBadRequest, "Unknown stage: choose queued, in_flight or retrying.")
	}
	p := &f.params
	p.State, p.Stage, p.LeaseOwnerPattern = optional(f.form.State), optional(f.form.Stage), leaseOwnerPattern(f.form.LeasedBy)
	var err error
	if p.Topic, p.TopicPrefix, p.TopicUpper, err = nameFilter(f.form.Topic, "topic"); err != nil {
		return f, err
	}
	if p.Destination, p.DestinationPrefix, p.DestinationUpper, err = nameFilter(f.form.Destination, "destination"); err != nil {
		return f, err
	}
	p.AggregateType, p.AggregateID = optional(f.form.AggregateType), optional(f.form.AggregateID)
	p.ErrorText = msgfilter.ErrorPattern(f.form.Error)
	if p.CreatedFrom, err = parseLocalTime(f.form.From, "From"); err != nil {
		return f, err
	}
	if p.CreatedTo, err = parseLocalTime(f.form.To, "To"); err != nil {
		return f, err
	}
	if p.Floor, p.Ceiling, err = msgfilter.IDRange(ctx, q, p.CreatedFrom, p.CreatedTo); err != nil {
		return f, err
	}
	if f.form.ID != "" {
		f.idGiven = true
		if f.id, err = resolveMessageID(ctx, q, f.form.ID); err != nil {
			return f, err
		}
	}
	return f, nil
}

// filtered reports whether any filter is set.
func (f messageFilter) filtered() bool {
	return f.form != templates.MessageFilter{}
}

// query returns the filters as URL parameters, plus extra (cursor)
// parameters: the URL of a page keeps every filter.
func (f messageFilter) query(extra ...string) string {
	v := url.Values{}
	for _, kv := range [][2]string{
		{"state", f.form.State}, {"topic", f.form.Topic}, {"destination", f.form.Destination},
		{"aggregate_type", f.form.AggregateType}, {"aggregate_id", f.form.AggregateID},
		{"id", f.form.ID}, {"error", f.form.Error}, {"from", f.form.From}, {"to", f.form.To},
		{"stage", f.form.Stage}, {"leased_by", f.form.LeasedBy},
	} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// bulkReplayURL is bulk replay (GET /replays) filled in with the list's
// filters, which a job takes with the same meaning (bulkreplay.Filter:
// prefixes, the error search, from/to as created_from/created_to), so the
// job replays the dead messages the list shows. When the list filters on
// what a job cannot take (one message id, a state other than dead, a
// pending stage or lease holder), link is "" and why says so in one line;
// both are "" for an unfiltered list.
func (f messageFilter) bulkReplayURL() (link, why string) {
	switch {
	case f.form.ID != "":
		return "", "No bulk replay for a message id: replay the message from its page, or clear the id filter."
	case f.form.State != "" && f.form.State != "dead":
		return "", "No bulk replay here: it takes dead messages only (state dead or any)."
	case f.form.Stage != "" || f.form.LeasedBy != "":
		return "", "No bulk replay here: it takes dead messages, and a pending stage or lease holder lists pending ones."
	}
	v := url.Values{}
	for _, kv := range [][2]string{
		{"topic", f.form.Topic}, {"destination", f.form.Destination}, {"aggregate_type", f.form.AggregateType},
		{"aggregate_id", f.form.AggregateID}, {"error_contains", f.form.Error},
		{"created_from", f.form.From}, {"created_to", f.form.To},
	} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if len(v) == 0 {
		return "", ""
	}
	return "/replays?" + v.Encode(), ""
}

// resolveMessageID reads a message id (uuid, the idempotency key) or a row
// id. A well-formed id of no message resolves to 0.
func resolveMessageID(ctx context.Context, q *queries.Queries, s string) (int64, error) {
	if id, err := strconv.ParseInt(s, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "The id filter takes a message id (uuid, the idempotency key) or a numeric id.")
	}
	id, err := q.ConsoleMessageIDGetByMessageID(ctx, u)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up message %s: %w", u, err)
	}
	return id, nil
}

// nameFilter reads a topic or destination filter (msgfilter.ParseName: a
// name ending in "*" or "." is a prefix); a prefix that cannot be searched
// is a 400 that says which field.
func nameFilter(s, field string) (exact, prefix, upper *string, err error) {
	n, err := msgfilter.ParseName(s)
	if err != nil {
		return nil, nil, nil, echo.NewHTTPError(http.StatusBadRequest, "The "+field+" prefix cannot be searched: end it with another character.")
	}
	return n.Exact, n.Prefix, n.Upper, nil
}

// leaseOwnerPattern is the lease_owner of every worker of the dispatcher
// named owner (nil for none), as a regular expression: a dispatcher's
// workers lease as "<owner>/<n>" (outbox.Dispatcher). Anchored and quoted,
// it matches the owner's workers and no other dispatcher's ("a/b/0" is a
// worker of "a/b", not of "a"), and the planner estimates it from the
// column's statistics.
func leaseOwnerPattern(owner string) *string {
	if owner == "" {
		return nil
	}
	p := "^" + regexp.QuoteMeta(owner) + "/[0-9]+$"
	return &p
}

func trimmed(v url.Values, key string) string { return strings.TrimSpace(v.Get(key)) }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// parseLocalTime reads a time as <input type="datetime-local"> sends it
// (UTC, to the minute, or with seconds and their fraction), or RFC 3339.
func parseLocalTime(s, field string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{datetimeLocal, datetimeLocalSeconds} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return &t, nil
		}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, echo.NewHTTPError(http.StatusBadRequest, field+" must be a date and time such as 2026-11-29T14:30 (UTC).")
	}
	return &t, nil
}

// localTimeValue is t as a datetime-local value (UTC) that parseLocalTime
// reads back as the same instant: to the minute when that is exact.
func localTimeValue(t time.Time) string {
	t = t.UTC()
	if t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format(datetimeLocal)
	}
	return t.Format(datetimeLocalSeconds + ".999999999")
}
