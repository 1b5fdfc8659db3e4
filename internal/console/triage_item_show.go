package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/web/templates"
)

// triageItemShow serves GET /triage/items/:id: what the item tracks (with
// a link), its state, notes and whole history from the event log, and the
// actions an operator may take; live through the triage socket.
func (h *Handler) triageItemShow(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return errNotFound("Triage item")
	}
	ctx := c.Request().Context()
	it, err := triage.Get(ctx, h.deps.DB, id)
	if errors.Is(err, triage.ErrNotFound) {
		return errNotFound("Triage item")
	}
	if err != nil {
		return err
	}
	notes, err := triage.Notes(ctx, h.deps.DB, id)
	if err != nil {
		return err
	}
	history, err := triage.History(ctx, h.deps.DB, id)
	if err != nil {
		return err
	}
	d := templates.TriageItemPage{
		Item: triageItemView(it), CanMutate: current(c).Role.Allows(auth.Operator),
		Replayable:   it.Kind == triage.DeadLetterGroup || it.Kind == triage.BlockedAggregate,
		NextStatuses: triage.NextStatuses(it.Status), Me: current(c).Name,
	}
	for _, n := range notes {
		d.Notes = append(d.Notes, templates.TriageNoteView{ID: n.ID, Author: n.Author, Body: n.Body, At: stamp(&n.CreatedAt), Edited: n.Edits > 0})
	}
	for _, e := range history {
		d.History = append(d.History, templates.TriageEventView{Version: e.Version, At: stamp(&e.At), Actor: e.Actor, Op: e.Op, Detail: string(e.Detail)})
	}
	d.Script, d.ScriptIntegrity, d.Style, d.StyleIntegrity = h.triageAssets()
	return render(c, http.StatusOK, templates.TriageItem(h.page(it.Title, templates.SectionTriage), d))
}
