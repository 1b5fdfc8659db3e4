package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// messagesList serves GET /messages: a keyset page of messages, newest
// first, under the filters in the URL. ?before=ID shows the page below a
// row, ?after=ID the page above one.
func (h *Handler) messagesList(c echo.Context) error {
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	f, err := parseMessageFilter(ctx, q, c.QueryParams())
	if err != nil {
		return err
	}
	before, after, err := cursorParams(c)
	if err != nil {
		return err
	}
	rows, pager, err := h.messagePage(ctx, q, f, before, after)
	if err != nil {
		return err
	}
	page := templates.MessagesPage{Filter: f.form, Filtered: f.filtered(), Pager: pager, FirstURL: "/messages" + f.query(),
		ByDelivery: !f.idGiven && choosePath(f.params) == pathDelivered}
	page.BulkReplayURL, page.NoBulkReplay = f.bulkReplayURL()
	for _, r := range rows {
		page.Rows = append(page.Rows, messageRow(r))
	}
	if !f.idGiven {
		if page.Total, err = messagesTotal(ctx, q, f, len(rows), before == 0 && after == 0 && pager.OlderURL == ""); err != nil {
			return err
		}
	}
	if before == 0 && after == 0 && !f.idGiven {
		top := int64(0)
		if len(rows) > 0 {
			top = rows[0].ID
		}
		page.NewURL = "/messages/new" + f.query("above", strconv.FormatInt(top, 10))
		page.NewAbove = top
		if page.ByDelivery {
			// A message below the first row's id may be delivered after
			// it: the control compares the first row's delivery with the
			// latest, which each stats event carries.
			page.NewAbove, page.NewByDelivery = 0, true
			if len(page.Rows) > 0 {
				page.NewAbove = page.Rows[0].FinishedAt.UnixMicro()
			}
		}
	}
	return render(c, http.StatusOK, templates.MessagesList(h.page("Messages", templates.SectionMessages), page))
}

// messagesTotal is the list's total: exact when the first page holds every
// match (complete), else the planner's estimate, which reads statistics
// and no row: an exact count would scan every matching message, and a
// page must stay fast at millions (`console bench pages`). The estimate is
// never below the rows shown.
func messagesTotal(ctx context.Context, q *queries.Queries, f messageFilter, shown int, complete bool) (*templates.ListTotal, error) {
	if complete {
		return &templates.ListTotal{Count: int64(shown), Exact: true}, nil
	}
	p := f.params
	n, err := q.ConsoleMessagesEstimate(ctx, queries.ConsoleMessagesEstimateParams{
		State: p.State, Topic: p.Topic, TopicPrefix: p.TopicPrefix, Destination: p.Destination,
		DestinationPrefix: p.DestinationPrefix, AggregateType: p.AggregateType, AggregateID: p.AggregateID,
		ErrorText: p.ErrorText, CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, Stage: p.Stage, LeaseOwnerPattern: p.LeaseOwnerPattern,
	})
	if err != nil {
		return nil, fmt.Errorf("estimate the messages: %w", err)
	}
	return &templates.ListTotal{Count: max(n, int64(shown))}, nil
}

// messagePage reads one page and links its neighbours.
func (h *Handler) messagePage(ctx context.Context, q *queries.Queries, f messageFilter, before, after int64) ([]queries.SwitchyardConsoleMessage, templates.Pager, error) {
	if f.idGiven {
		rows, err := messageByID(ctx, q, f)
		return rows, templates.Pager{}, err
	}
	p := f.params
	p.MaxRows = pageSize + 1
	if after > 0 {
		p.Cursor = after
		// Bounded as the older pages are (scanWindow); a short page shows
		// the first page, which is bounded too.
		if err := scanWindowAbove(ctx, q, &p); err != nil {
			return nil, templates.Pager{}, err
		}
		rows, err := messagesNewer(ctx, q, p)
		if err != nil {
			return nil, templates.Pager{}, err
		}
		if len(rows) <= pageSize {
			// Back at the top: show the first page, which is complete.
			return h.messagePage(ctx, q, f, 0, 0)
		}
		rows = rows[:pageSize]
		slices.Reverse(rows)
		return rows, templates.Pager{
			NewerURL: "/messages" + f.query("after", strconv.FormatInt(rows[0].ID, 10)),
			OlderURL: "/messages" + f.query("before", strconv.FormatInt(rows[len(rows)-1].ID, 10)),
		}, nil
	}
	p.Cursor = before
	if before == 0 {
		p.Cursor = 1<<63 - 1
	}
	searched, err := scanWindow(ctx, q, &p)
	if err != nil {
		return nil, templates.Pager{}, err
	}
	rows, err := messagesOlder(ctx, q, p)
	if err != nil {
		return nil, templates.Pager{}, err
	}
	var pager templates.Pager
	switch {
	case len(rows) > pageSize:
		rows = rows[:pageSize]
		pager.OlderURL = "/messages" + f.query("before", strconv.FormatInt(rows[len(rows)-1].ID, 10))
	case searched != "":
		// The window ended before the page filled: the next page
		// searches the ids below it.
		pager.OlderURL = "/messages" + f.query("before", strconv.FormatInt(p.Floor, 10))
		pager.Searched = searched + "; older ones are searched on the next page."
	}
	if before > 0 && len(rows) > 0 {
		pager.NewerURL = "/messages" + f.query("after", strconv.FormatInt(rows[0].ID, 10))
	}
	return rows, pager, nil
}

// searchWindow is how many ids one page of a list with a filter that no
// index serves (error text; an aggregate id or type alone; a topic or
// destination among delivered messages) searches at
// most. Such a filter may match almost nothing, and a page must not walk
// the whole table to find out: it searches this many ids below its cursor
// and links to the next window. Walking 50,000 ids took 20 ms at the
// median on the shared 2-core machine and over 50 ms at its p95 when busy
// (`console bench pages`, messages_topic_rare); half that keeps such a
// page well inside the 50 ms target.
const searchWindow = 25000

// scanWindow narrows p's ids to one window below its cursor when its
// filters need it, and says which messages it searched ("" when it did
// not narrow them). A filter no index serves gets searchWindow ids; a
// stage or lease holder (pendingOnly), served by the pending messages'
// index, the searchWindow pending messages below the cursor, so that a
// backlog of any size costs a page no more than that: a dispatcher's
// leases are among the oldest of a backlog, below every message queued
// since (a walk of 200,000 pending took 0.4 to 0.9 s, EXPLAIN.md).
func scanWindow(ctx context.Context, q *queries.Queries, p *queries.ConsoleMessagesListOlderParams) (string, error) {
	searched := ""
	if unindexedFilter(*p) {
		top := p.Cursor
		if top == 1<<63-1 {
			b, err := q.ConsoleMessageIDBoundsGet(ctx)
			if err != nil {
				return "", fmt.Errorf("read the id bounds: %w", err)
			}
			top = b.High + 1
			if p.Ceiling <= b.High {
				top = p.Ceiling + 1
			}
			p.Cursor = top
		}
		if low := top - searchWindow; low > p.Floor {
			p.Floor = low
			searched = fmt.Sprintf("Searched messages %d to %d", p.Floor, p.Cursor-1)
		}
	}
	if pendingOnly(*p) {
		low, err := q.ConsoleMessagePendingIDBelow(ctx, queries.ConsoleMessagePendingIDBelowParams{Cursor: p.Cursor, Skip: searchWindow - 1})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // none: fewer pending than the window
			return "", fmt.Errorf("bound the pending messages searched: %w", err)
		}
		if err == nil && low > p.Floor {
			p.Floor = low
			searched = fmt.Sprintf("Searched %s pending messages, down to message %d", count(searchWindow, false), low)
		}
	}
	return searched, nil
}

// scanWindowAbove is scanWindow for the page above p.Cursor: it narrows
// p's ids to the window above it.
func scanWindowAbove(ctx context.Context, q *queries.Queries, p *queries.ConsoleMessagesListOlderParams) error {
	if unindexedFilter(*p) {
		p.Ceiling = min(p.Ceiling, p.Cursor+searchWindow)
	}
	if pendingOnly(*p) {
		high, err := q.ConsoleMessagePendingIDAbove(ctx, queries.ConsoleMessagePendingIDAboveParams{Cursor: p.Cursor, Skip: searchWindow - 1})
		switch {
		case err == nil:
			p.Ceiling = min(p.Ceiling, high)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("bound the pending messages searched: %w", err)
		}
	}
	return nil
}

// messageByID is the list when the id filter names one message: that
// message if the other filters let it through.
func messageByID(ctx context.Context, q *queries.Queries, f messageFilter) ([]queries.SwitchyardConsoleMessage, error) {
	if f.id == 0 {
		return nil, nil
	}
	p := f.params
	// One id: its range is the message itself, whatever index the other
	// filters pick.
	p.Cursor, p.MaxRows, p.Floor = f.id+1, 1, max(p.Floor, f.id)
	rows, err := messagesOlder(ctx, q, p)
	if err != nil || len(rows) == 0 || rows[0].ID != f.id {
		return nil, err
	}
	return rows, nil
}

// cursorParams reads ?before= and ?after=, row ids; at most one is set.
func cursorParams(c echo.Context) (before, after int64, err error) {
	read := func(name string) (int64, error) {
		s := c.QueryParam(name)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, echo.NewHTTPError(http.StatusBadRequest, "The page cursor "+name+" must be a positive id.")
		}
		return n, nil
	}
	if before, err = read("before"); err != nil {
		return 0, 0, err
	}
	if after, err = read("after"); err != nil {
		return 0, 0, err
	}
	if before > 0 && after > 0 {
		return 0, 0, echo.NewHTTPError(http.StatusBadRequest, "A page has one cursor: before or after, not both.")
	}
	return before, after, nil
}

// errNotFound is the 404 of a page whose subject does not exist.
func errNotFound(what string) error {
	return echo.NewHTTPError(http.StatusNotFound, what+" not found.")
}

// notFound maps pgx.ErrNoRows to a 404 and wraps anything else.
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotFound(what)
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// unindexedFilter reports whether p has a filter that no index serves.
// Delivered messages in a range of ids (creation times, one message's id)
// count among them: their index is in delivery order, and a delivery may
// come long after its message's creation.
func unindexedFilter(p queries.ConsoleMessagesListOlderParams) bool {
	named := p.Topic != nil || p.Destination != nil || p.TopicPrefix != nil || p.DestinationPrefix != nil
	ranged := p.Floor > 0 || p.Ceiling < msgfilter.NoCeiling
	return p.ErrorText != nil || (p.AggregateID == nil) != (p.AggregateType == nil) ||
		(named && !undelivered(p.State)) || (ranged && deliveredOnly(p.State))
}
