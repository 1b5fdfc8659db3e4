package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/templates"
)

// blockedCursor is the keyset of the blocked aggregates list.
type blockedCursor struct {
	BlockedAt     time.Time `json:"t"`
	Destination   string    `json:"d"`
	AggregateType string    `json:"y"`
	AggregateID   string    `json:"i"`
}

// aggregatesBlockedList serves GET /aggregates/blocked: the aggregates
// held by a dead head, longest blocked first (?next= and ?prev= cursors).
func (h *Handler) aggregatesBlockedList(c echo.Context) error {
	var next, prev blockedCursor
	hasNext, err := decodeCursor(c, "next", &next)
	if err != nil {
		return err
	}
	hasPrev, err := decodeCursor(c, "prev", &prev)
	if err != nil {
		return err
	}
	rows, pager, err := blockedPage(c.Request().Context(), queries.New(h.deps.DB), next, hasNext, prev, hasPrev)
	if err != nil {
		return err
	}
	if err := h.blockedTriage(c.Request().Context(), rows); err != nil {
		return err
	}
	for i := range rows {
		rows[i].ReplayRequestID, rows[i].DiscardRequestID = uuid.NewString(), uuid.NewString()
	}
	return render(c, http.StatusOK, templates.BlockedAggregates(h.page("Blocked aggregates", templates.SectionDeadLetters),
		templates.BlockedAggregatesPage{Rows: rows, Pager: pager, CanOperate: current(c).Role.Allows(auth.Operator)}))
}

func blockedPage(ctx context.Context, q *queries.Queries, next blockedCursor, hasNext bool, prev blockedCursor, hasPrev bool) ([]templates.BlockedAggregate, templates.Pager, error) {
	link := func(param string, r templates.BlockedAggregate) string {
		return "/aggregates/blocked?" + param + "=" + encodeCursor(blockedCursor{r.BlockedAt, r.Destination, r.AggregateType, r.AggregateID})
	}
	var pager templates.Pager
	if hasPrev {
		rs, err := q.BlockedAggregateListNewer(ctx, queries.BlockedAggregateListNewerParams{
			BlockedAt: prev.BlockedAt, Destination: prev.Destination, AggregateType: prev.AggregateType,
			AggregateID: prev.AggregateID, MaxRows: pageSize + 1})
		if err != nil {
			return nil, pager, fmt.Errorf("list blocked aggregates: %w", err)
		}
		if len(rs) <= pageSize {
			return blockedPage(ctx, q, blockedCursor{}, false, blockedCursor{}, false)
		}
		rows := make([]templates.BlockedAggregate, 0, pageSize)
		for _, r := range rs[:pageSize] {
			rows = append(rows, blockedView(r.Destination, r.AggregateType, r.AggregateID, r.DeadMessageID, r.BlockedAt, r.Waiting))
		}
		slices.Reverse(rows)
		pager.NewerURL, pager.OlderURL = link("prev", rows[0]), link("next", rows[len(rows)-1])
		return rows, pager, nil
	}
	p := queries.BlockedAggregateListOlderParams{MaxRows: pageSize + 1}
	if hasNext {
		p.BlockedAt, p.Destination, p.AggregateType, p.AggregateID = &next.BlockedAt, next.Destination, next.AggregateType, next.AggregateID
	}
	rs, err := q.BlockedAggregateListOlder(ctx, p)
	if err != nil {
		return nil, pager, fmt.Errorf("list blocked aggregates: %w", err)
	}
	rows := make([]templates.BlockedAggregate, 0, len(rs))
	for _, r := range rs {
		rows = append(rows, blockedView(r.Destination, r.AggregateType, r.AggregateID, r.DeadMessageID, r.BlockedAt, r.Waiting))
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

func blockedView(dest, aggType, aggID string, dead int64, at time.Time, waiting int64) templates.BlockedAggregate {
	f := messageFilter{}
	f.form.Destination, f.form.AggregateType, f.form.AggregateID = dest, aggType, aggID
	return templates.BlockedAggregate{
		Destination: dest, AggregateType: aggType, AggregateID: aggID, DeadMessageID: dead,
		BlockedAt: at, Waiting: waiting, MessagesURL: "/messages" + f.query(),
	}
}

// blockedTriage sets each row's triage item, read in one query.
func (h *Handler) blockedTriage(ctx context.Context, rows []templates.BlockedAggregate) error {
	type key struct{ Destination, AggregateType, AggregateID string }
	refs := make([][]byte, len(rows))
	for i, r := range rows {
		ref, err := json.Marshal(map[string]string{"destination": r.Destination, "aggregate_type": r.AggregateType, "aggregate_id": r.AggregateID})
		if err != nil {
			return err
		}
		refs[i] = ref
	}
	items, err := triage.FindMany(ctx, h.deps.DB, triage.BlockedAggregate, refs)
	if err != nil {
		return err
	}
	byKey := make(map[key]templates.TriageItemView, len(items))
	for _, it := range items {
		var k struct {
			Destination   string `json:"destination"`
			AggregateType string `json:"aggregate_type"`
			AggregateID   string `json:"aggregate_id"`
		}
		if json.Unmarshal(it.Ref, &k) == nil {
			byKey[key(k)] = triageItemView(it)
		}
	}
	for i, r := range rows {
		if v, ok := byKey[key{r.Destination, r.AggregateType, r.AggregateID}]; ok {
			rows[i].Triage = &v
		}
	}
	return nil
}
