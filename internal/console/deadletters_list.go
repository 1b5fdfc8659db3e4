package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// trendHours is how far back a group's sparkline reaches.
const trendHours = 24

// groupCursor is the keyset of the dead-letter group list.
type groupCursor struct {
	LastDeadAt  time.Time `json:"t"`
	Fingerprint string    `json:"f"`
}

// deadLettersList serves GET /dead-letters: the groups, most recently seen
// first, keyset-paginated (?next= and ?prev= cursors).
func (h *Handler) deadLettersList(c echo.Context) error {
	d, err := h.deadLetterPage(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.DeadLetters(h.page("Dead letters", templates.SectionDeadLetters), d))
}

// deadLettersRegion serves GET /dead-letters/groups: the list region
// alone, for the live refresh.
func (h *Handler) deadLettersRegion(c echo.Context) error {
	d, err := h.deadLetterPage(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.DeadLetterGroups(d))
}

func (h *Handler) deadLetterPage(c echo.Context) (templates.DeadLettersPage, error) {
	var next, prev groupCursor
	hasNext, err := decodeCursor(c, "next", &next)
	if err != nil {
		return templates.DeadLettersPage{}, err
	}
	hasPrev, err := decodeCursor(c, "prev", &prev)
	if err != nil {
		return templates.DeadLettersPage{}, err
	}
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	groups, pager, err := deadLetterGroups(ctx, q, next, hasNext, prev, hasPrev)
	if err != nil {
		return templates.DeadLettersPage{}, err
	}
	views, err := groupViews(ctx, q, groups)
	if err != nil {
		return templates.DeadLettersPage{}, err
	}
	region := "/dead-letters/groups"
	if q := c.QueryString(); q != "" {
		region += "?" + q
	}
	return templates.DeadLettersPage{Groups: views, Pager: pager, RegionURL: region}, nil
}

// deadLetterGroups reads one page of groups and links its neighbours.
func deadLetterGroups(ctx context.Context, q *queries.Queries, next groupCursor, hasNext bool, prev groupCursor, hasPrev bool) ([]queries.SwitchyardDeadLetterGroup, templates.Pager, error) {
	link := func(param string, g queries.SwitchyardDeadLetterGroup) string {
		return "/dead-letters?" + param + "=" + encodeCursor(groupCursor{g.LastDeadAt, g.Fingerprint})
	}
	var pager templates.Pager
	if hasPrev {
		rows, err := q.DeadLetterGroupListNewer(ctx, queries.DeadLetterGroupListNewerParams{
			LastDeadAt: prev.LastDeadAt, Fingerprint: prev.Fingerprint, MaxRows: pageSize + 1})
		if err != nil {
			return nil, pager, fmt.Errorf("list dead-letter groups: %w", err)
		}
		if len(rows) <= pageSize {
			return deadLetterGroups(ctx, q, groupCursor{}, false, groupCursor{}, false)
		}
		rows = rows[:pageSize]
		slices.Reverse(rows)
		pager.NewerURL, pager.OlderURL = link("prev", rows[0]), link("next", rows[len(rows)-1])
		return rows, pager, nil
	}
	p := queries.DeadLetterGroupListOlderParams{MaxRows: pageSize + 1}
	if hasNext {
		p.LastDeadAt, p.Fingerprint = &next.LastDeadAt, next.Fingerprint
	}
	rows, err := q.DeadLetterGroupListOlder(ctx, p)
	if err != nil {
		return nil, pager, fmt.Errorf("list dead-letter groups: %w", err)
	}
	if len(rows) > pageSize {
		rows = rows[:pageSize]
		pager.OlderURL = link("next", rows[len(rows)-1])
	}
	if hasNext && len(rows) > 0 {
		pager.NewerURL = link("prev", rows[0])
	}
	return rows, pager, nil
}

// groupViews maps groups to their views, with each one's hourly trend.
func groupViews(ctx context.Context, q *queries.Queries, groups []queries.SwitchyardDeadLetterGroup) ([]templates.DeadLetterGroup, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	fps := make([]string, len(groups))
	for i, g := range groups {
		fps[i] = g.Fingerprint
	}
	hours, err := q.DeadLetterHourListTrends(ctx, queries.DeadLetterHourListTrendsParams{Hours: trendHours, Fingerprints: fps})
	if err != nil {
		return nil, fmt.Errorf("read dead-letter trends: %w", err)
	}
	trends := map[string][]int32{}
	for _, hr := range hours {
		t := trends[hr.Fingerprint]
		if t == nil {
			t = make([]int32, trendHours)
			trends[hr.Fingerprint] = t
		}
		if hr.Slot >= 0 && hr.Slot < trendHours {
			t[hr.Slot] += hr.Dead
		}
	}
	out := make([]templates.DeadLetterGroup, len(groups))
	for i, g := range groups {
		out[i] = groupView(g, trends[g.Fingerprint])
	}
	return out, nil
}

func groupView(g queries.SwitchyardDeadLetterGroup, trend []int32) templates.DeadLetterGroup {
	if trend == nil {
		trend = make([]int32, trendHours)
	}
	return templates.DeadLetterGroup{
		Fingerprint: g.Fingerprint, Dead: g.Dead, FirstDeadAt: g.FirstDeadAt, LastDeadAt: g.LastDeadAt,
		SampleID: g.SampleID, SampleError: shorten(g.SampleError, 300), Destinations: g.Destinations, Trend: trend,
	}
}
