package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// inboxPageSize is how many events one page of the inbox lists.
const inboxPageSize = 50

// inboxStatuses are the status filter's choices: the statuses of
// switchyard.inbox_events plus "duplicates", which lists the per-source
// duplicate counters (duplicates are counted, not stored per delivery).
var inboxStatuses = []string{"processed", "failed", "parked", "stale", "held", "duplicates"}

// inboxList lists inbound events newest first: filters source and status
// and the keyset cursor before (an event id) come from the URL.
func (h *Handler) inboxList(c echo.Context) error {
	l, err := h.inboxListView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.InboxPage(h.page("Inbox", templates.SectionInbox), l))
}

// inboxListLive is GET /inbox/live, the list's live region, with the
// list's query.
func (h *Handler) inboxListLive(c echo.Context) error {
	l, err := h.inboxListView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.InboxListLive(l))
}

// inboxListView reads the list the URL's filters and cursor ask for.
func (h *Handler) inboxListView(c echo.Context) (templates.InboxList, error) {
	ctx := c.Request().Context()
	source, status := c.QueryParam("source"), c.QueryParam("status")
	if status != "" && !slices.Contains(inboxStatuses, status) {
		return templates.InboxList{}, echo.NewHTTPError(http.StatusBadRequest, "Unknown status filter.")
	}
	var before int64
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return templates.InboxList{}, echo.NewHTTPError(http.StatusBadRequest, "Invalid page cursor.")
		}
		before = n
	}
	q := queries.New(h.deps.DB)
	sources, err := q.InboxSourceListNames(ctx)
	if err != nil {
		return templates.InboxList{}, err
	}
	l := templates.InboxList{Source: source, Status: status, Sources: sources, Statuses: inboxStatuses,
		CanOperate: current(c).Role.Allows(auth.Operator)}
	l.LiveHref = strings.Replace(inboxHref(source, status, before), "/inbox", "/inbox/live", 1)
	if status == "duplicates" {
		rows, err := q.InboxDuplicateList(ctx)
		if err != nil {
			return templates.InboxList{}, err
		}
		for _, r := range rows {
			if source == "" || r.Source == source {
				l.Duplicates = append(l.Duplicates, templates.InboxDuplicateRow{Source: r.Source, Duplicates: count(r.Duplicates, false), LastAt: stamp(&r.LastAt)})
			}
		}
	} else if err := h.inboxEvents(c, q, &l, before); err != nil {
		return templates.InboxList{}, err
	}
	return l, nil
}

// inboxEvents fills one page of events; it reads one row more than it
// shows to know whether there is a next page.
func (h *Handler) inboxEvents(c echo.Context, q *queries.Queries, l *templates.InboxList, before int64) error {
	ctx := c.Request().Context()
	var rows []queries.InboxEventListRow
	var err error
	if l.Status != "" && l.Status != "processed" {
		var att []queries.InboxEventListAttentionRow
		att, err = q.InboxEventListAttention(ctx, queries.InboxEventListAttentionParams{
			Status: l.Status, BeforeID: before, Source: l.Source, MaxRows: inboxPageSize + 1})
		for _, r := range att {
			rows = append(rows, queries.InboxEventListRow(r))
		}
	} else {
		rows, err = q.InboxEventList(ctx, queries.InboxEventListParams{
			BeforeID: before, Source: l.Source, Status: l.Status, MaxRows: inboxPageSize + 1})
	}
	if err != nil {
		return err
	}
	if len(rows) > inboxPageSize {
		rows = rows[:inboxPageSize]
		l.NextHref = inboxHref(l.Source, l.Status, rows[len(rows)-1].ID)
	}
	if before > 0 {
		l.FirstHref = inboxHref(l.Source, l.Status, 0)
	}
	for _, r := range rows {
		row := templates.InboxEventRow{
			Href: "/inbox/events/" + strconv.FormatInt(r.ID, 10), Source: r.Source, EventID: r.EventID,
			ReceivedAt: stamp(&r.ReceivedAt), Entity: entity(r.EntityKey, r.EntityVersion),
			Status: r.Status, Tone: inboxTone(r.Status), Attempts: strconv.Itoa(realAttempts(r.Status, r.Attempts)), Error: deref(r.LastError),
			ID: strconv.FormatInt(r.ID, 10),
		}
		if l.CanOperate && (r.Status == "failed" || r.Status == "parked") {
			row.RetryRequestID = uuid.NewString()
		}
		l.Events = append(l.Events, row)
	}
	return nil
}

func inboxHref(source, status string, before int64) string {
	v := url.Values{}
	if source != "" {
		v.Set("source", source)
	}
	if status != "" {
		v.Set("status", status)
	}
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	if len(v) == 0 {
		return "/inbox"
	}
	return "/inbox?" + v.Encode()
}

func inboxTone(status string) string {
	switch status {
	case "processed":
		return "ok"
	case "failed", "held":
		return "warn"
	case "parked":
		return "bad"
	}
	return ""
}

func entity(key string, version *int64) string {
	if key == "" {
		return ""
	}
	if version == nil {
		return key
	}
	return key + " v" + strconv.FormatInt(*version, 10)
}

// stamp formats a database time for people, in UTC.
func stamp(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
