package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/templates"
)

// deadLetterGroupShow serves GET /dead-letters/:fingerprint: the group and
// its dead messages, newest first (?before= and ?after= row ids).
func (h *Handler) deadLetterGroupShow(c echo.Context) error {
	fp := c.Param("fingerprint")
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	g, err := q.DeadLetterGroupGet(ctx, fp)
	if err != nil {
		return notFound(err, "Dead-letter group")
	}
	before, after, err := cursorParams(c)
	if err != nil {
		return err
	}
	views, err := groupViews(ctx, q, []queries.SwitchyardDeadLetterGroup{g})
	if err != nil {
		return err
	}
	base := "/dead-letters/" + url.PathEscape(fp)
	rows, pager, err := groupMessages(c, q, fp, base, before, after)
	if err != nil {
		return err
	}
	page := templates.DeadLetterGroupPage{Group: views[0], Rows: messageRows(rows), Pager: pager}
	item, tracked, err := h.triageOf(ctx, triage.DeadLetterGroup, map[string]string{"fingerprint": fp})
	if err != nil {
		return err
	}
	if tracked {
		page.Triage = &item
	}
	return render(c, http.StatusOK, templates.DeadLetterGroupShow(h.page("Dead-letter group", templates.SectionDeadLetters), page))
}

// groupMessages reads one page of a group's messages and links its
// neighbours.
func groupMessages(c echo.Context, q *queries.Queries, fp, base string, before, after int64) ([]queries.SwitchyardConsoleMessage, templates.Pager, error) {
	ctx := c.Request().Context()
	link := func(param string, id int64) string { return base + "?" + param + "=" + strconv.FormatInt(id, 10) }
	var pager templates.Pager
	if after > 0 {
		rows, err := q.DeadLetterMessageListNewer(ctx, queries.DeadLetterMessageListNewerParams{
			Fingerprint: fp, Cursor: after, MaxRows: pageSize + 1})
		if err != nil {
			return nil, pager, fmt.Errorf("list the group's messages: %w", err)
		}
		if len(rows) <= pageSize {
			return groupMessages(c, q, fp, base, 0, 0)
		}
		rows = rows[:pageSize]
		slices.Reverse(rows)
		pager.NewerURL, pager.OlderURL = link("after", rows[0].ID), link("before", rows[len(rows)-1].ID)
		return rows, pager, nil
	}
	cursor := before
	if cursor == 0 {
		cursor = 1<<63 - 1
	}
	rows, err := q.DeadLetterMessageListOlder(ctx, queries.DeadLetterMessageListOlderParams{
		Fingerprint: fp, Cursor: cursor, MaxRows: pageSize + 1})
	if err != nil {
		return nil, pager, fmt.Errorf("list the group's messages: %w", err)
	}
	if len(rows) > pageSize {
		rows = rows[:pageSize]
		pager.OlderURL = link("before", rows[len(rows)-1].ID)
	}
	if before > 0 && len(rows) > 0 {
		pager.NewerURL = link("after", rows[0].ID)
	}
	return rows, pager, nil
}
