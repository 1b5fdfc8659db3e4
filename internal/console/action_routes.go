package console

import (
	"net/http"

	"github.com/switchyard/switchyard/internal/auth"
)

// actionRoutes are the routes of the operator actions, part of the route
// table (routes). Every unsafe one records a forbidden refusal of its
// action (recordDenials) and, but for the estimates, which change
// nothing, goes through the idempotency store (idempotent, which records
// denials too). The actions check roles themselves as well: edit and
// replay through the JSON API's replay route needs admin (the route's
// least role is operator).
func (h *Handler) actionRoutes() []route {
	idem, deny := h.idempotent, h.recordDenials
	return []route{
		// JSON API (docs/actions.md).
		{http.MethodPost, "/api/messages/:id/replay", auth.Operator, idem(h.apiMessageReplay)},
		{http.MethodPost, "/api/messages/:id/discard", auth.Operator, idem(h.apiMessageDiscard)},
		{http.MethodPost, "/api/messages/:id/restore", auth.Operator, idem(h.apiMessageRestore)},
		{http.MethodPost, "/api/replay-jobs/estimate", auth.Operator, deny(h.apiReplayJobEstimate)},
		{http.MethodPost, "/api/replay-jobs", auth.Operator, idem(h.apiReplayJobStart)},
		{http.MethodPost, "/api/replay-jobs/:id/cancel", auth.Operator, idem(h.apiReplayJobCancel)},
		{http.MethodGet, "/api/replay-jobs/:id", auth.Viewer, h.apiReplayJobShow},

		// A message's actions panel, on its own page and as a fragment.
		{http.MethodGet, "/messages/:id/actions", auth.Viewer, h.messageActionsShow},
		{http.MethodGet, "/messages/:id/actions/panel", auth.Viewer, h.messageActionsPanel},
		{http.MethodPost, "/messages/:id/actions/replay", auth.Operator, idem(h.messageReplaySubmit)},
		{http.MethodPost, "/messages/:id/actions/discard", auth.Operator, idem(h.messageDiscardSubmit)},
		{http.MethodPost, "/messages/:id/actions/restore", auth.Operator, idem(h.messageRestoreSubmit)},
		{http.MethodPost, "/messages/:id/actions/edit-preview", auth.Admin, h.messageEditPreview},
		{http.MethodPost, "/messages/:id/actions/edit-replay", auth.Admin, idem(h.messageEditReplaySubmit)},

		// A blocked aggregate's dead head, from its row.
		{http.MethodPost, "/aggregates/blocked/:id/replay", auth.Operator, idem(h.aggregateHeadReplay)},
		{http.MethodPost, "/aggregates/blocked/:id/discard", auth.Operator, idem(h.aggregateHeadDiscard)},

		// Bulk replay.
		{http.MethodGet, "/replays", auth.Viewer, h.replaysShow},
		{http.MethodGet, "/replays/jobs", auth.Viewer, h.replayJobsList},
		{http.MethodPost, "/replays/estimate", auth.Operator, deny(h.replayJobEstimate)},
		{http.MethodPost, "/replays", auth.Operator, idem(h.replayJobStart)},
		{http.MethodPost, "/replays/:id/cancel", auth.Operator, idem(h.replayJobCancel)},
	}
}
