package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/templates"
)

// boardStatuses are the board's columns, in lifecycle order.
var boardStatuses = []triage.Status{triage.Open, triage.Acknowledged, triage.Investigating, triage.Resolved, triage.Ignored}

// triageKinds label the kinds of item.
var triageKinds = []templates.TriageKindOption{
	{Value: string(triage.DeadLetterGroup), Label: "Dead-letter group"},
	{Value: string(triage.InboxFailureGroup), Label: "Parked inbox events"},
	{Value: string(triage.BlockedAggregate), Label: "Blocked aggregate"},
	{Value: string(triage.ReconcileFindings), Label: "Reconciliation findings"},
}

// boardColumnSize bounds each column: the most recently changed items.
const boardColumnSize = 50

// triageBoard serves GET /triage: items by status, filtered by ?mine=1,
// ?unassigned=1 and ?kind=, with each status's count; live through the
// triage socket (web/static/triage.js).
func (h *Handler) triageBoard(c echo.Context) error {
	ctx := c.Request().Context()
	b := templates.TriageBoardPage{Mine: c.QueryParam("mine") == "1", Unassigned: c.QueryParam("unassigned") == "1", Kinds: triageKinds}
	for _, k := range triageKinds {
		if c.QueryParam("kind") == k.Value {
			b.Kind = k.Value
		}
	}
	f := triage.Filter{Kind: triage.Kind(b.Kind), Unassigned: b.Unassigned, Limit: boardColumnSize}
	if b.Mine {
		me := current(c).UserID
		f.AssigneeID = &me
	}
	counts, err := triage.Counts(ctx, h.deps.DB)
	if err != nil {
		return err
	}
	var ids []string
	for _, s := range boardStatuses {
		f.Statuses = []triage.Status{s}
		items, err := triage.List(ctx, h.deps.DB, f)
		if err != nil {
			return err
		}
		col := templates.TriageColumn{Status: string(s), Label: strings.ToUpper(string(s[:1])) + string(s[1:]), Count: counts[s]}
		for _, it := range items {
			col.Items = append(col.Items, triageItemView(it))
			ids = append(ids, strconv.FormatInt(it.ID, 10))
		}
		b.Columns = append(b.Columns, col)
	}
	b.ItemIDs = strings.Join(ids, ",")
	b.Script, b.ScriptIntegrity, b.Style, b.StyleIntegrity = h.triageAssets()
	return render(c, http.StatusOK, templates.TriageBoard(h.page("Triage", templates.SectionTriage), b))
}

func (h *Handler) triageAssets() (script, scriptSRI, style, styleSRI string) {
	a := h.deps.Assets
	return a.Path("triage.js"), a.Integrity("triage.js"), a.Path("triage.css"), a.Integrity("triage.css")
}

// triageItemView is the view of it; an expired claim shows as none.
func triageItemView(it triage.Item) templates.TriageItemView {
	v := templates.TriageItemView{
		ID: it.ID, Href: "/triage/items/" + strconv.FormatInt(it.ID, 10), Title: it.Title, Status: string(it.Status),
		Assignee: it.Assignee, Version: it.Version, Updated: stamp(&it.UpdatedAt),
	}
	if v.Title == "" {
		v.Title = "Item " + strconv.FormatInt(it.ID, 10)
	}
	for _, k := range triageKinds {
		if k.Value == string(it.Kind) {
			v.KindLabel = k.Label
		}
	}
	if it.IgnoredUntil != nil {
		v.IgnoredUntil = stamp(it.IgnoredUntil)
	}
	if it.ClaimedAt(time.Now()) {
		v.ClaimHolder, v.ClaimUntil = it.ClaimHolder, stamp(it.ClaimExpiresAt)
	}
	v.TrackedHref, v.TrackedLabel = tracked(it)
	return v
}

// tracked links the page of the failure an item tracks.
func tracked(it triage.Item) (href, label string) {
	var ref map[string]string
	_ = json.Unmarshal(it.Ref, &ref) // a ref is a JSON object of strings; anything else links nowhere
	switch it.Kind {
	case triage.DeadLetterGroup:
		return "/dead-letters/" + url.PathEscape(ref["fingerprint"]), "the dead-letter group"
	case triage.BlockedAggregate:
		return "/aggregates/blocked", "blocked aggregates (" + ref["aggregate_type"] + "/" + ref["aggregate_id"] + ")"
	case triage.InboxFailureGroup:
		return "/inbox?status=parked&source=" + url.QueryEscape(ref["source"]), "parked events of " + ref["source"]
	case triage.ReconcileFindings:
		return reconcileTracked(ref)
	}
	return "", ""
}

// triageOf is the view of the item that tracks (kind, ref), for the page
// of the failure itself; ok is false if no item does.
func (h *Handler) triageOf(ctx context.Context, kind triage.Kind, ref map[string]string) (v templates.TriageItemView, ok bool, err error) {
	raw, err := json.Marshal(ref)
	if err != nil {
		return v, false, err
	}
	it, err := triage.Find(ctx, h.deps.DB, kind, raw)
	if errors.Is(err, triage.ErrNotFound) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	return triageItemView(it), true, nil
}
