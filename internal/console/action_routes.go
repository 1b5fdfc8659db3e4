package console

import (
	"net/http"

	"github.com/switchyard/switchyard/internal/auth"
)

// actionRoutes are the routes of the operator actions, part of the route
// table (routes). Every unsafe one goes through the idempotency store;
// edit and replay through the JSON API's replay route checks the admin
// role itself (the route's least role is operator).
func (h *Handler) actionRoutes() []route {
	idem := h.idempotent
	return []route{
		// JSON API (docs in internal/console/action.go and the README).
		{http.MethodPost, "/api/messages/:id/replay", auth.Operator, idem(h.apiMessageReplay)},
		{http.MethodPost, "/api/messages/:id/discard", auth.Operator, idem(h.apiMessageDiscard)},
		{http.MethodPost, "/api/messages/:id/restore", auth.Operator, idem(h.apiMessageRestore)},
		{http.MethodPost, "/api/replay-jobs/estimate", auth.Operator, h.apiJobEstimate},
		{http.MethodPost, "/api/replay-jobs", auth.Operator, idem(h.apiJobStart)},
		{http.MethodPost, "/api/replay-jobs/:id/cancel", auth.Operator, idem(h.apiJobCancel)},
		{http.MethodGet, "/api/replay-jobs/:id", auth.Viewer, h.apiJobShow},

		// A message's actions panel, on its own page and as a fragment.
		{http.MethodGet, "/messages/:id/actions", auth.Viewer, h.messageActionsShow},
		{http.MethodGet, "/messages/:id/actions/panel", auth.Viewer, h.messageActionsPanel},
		{http.MethodPost, "/messages/:id/actions/replay", auth.Operator, idem(h.messageReplaySubmit)},
		{http.MethodPost, "/messages/:id/actions/discard", auth.Operator, idem(h.messageDiscardSubmit)},
		{http.MethodPost, "/messages/:id/actions/restore", auth.Operator, idem(h.messageRestoreSubmit)},
		{http.MethodPost, "/messages/:id/actions/edit-preview", auth.Admin, h.messageEditPreview},
		{http.MethodPost, "/messages/:id/actions/edit-replay", auth.Admin, idem(h.messageEditReplaySubmit)},

		// Bulk replay.
		{http.MethodGet, "/replays", auth.Viewer, h.replaysShow},
		{http.MethodGet, "/replays/jobs", auth.Viewer, h.replayJobsFragment},
		{http.MethodPost, "/replays/estimate", auth.Operator, h.replaysEstimate},
		{http.MethodPost, "/replays", auth.Operator, idem(h.replaysStart)},
		{http.MethodPost, "/replays/:id/cancel", auth.Operator, idem(h.replaysCancel)},
	}
}
