package console

import (
	"context"
	"log/slog"
	"net/url"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// maxCheckText bounds a failed check's text on the dashboard's status
// line; the destination's page has all of it.
const maxCheckText = 140

// withConfigChecks adds to the dashboard's status line every enabled
// destination whose last check failed (a JetStream destination whose
// subjects no stream captures: each of its messages would go dead), as a
// failing reason linking to its pending messages. One read of a table of
// a row per destination, made at most once a second per instance (the
// live region's cache); a failed read leaves the status as it is.
func (h *Handler) withConfigChecks(ctx context.Context, v templates.DashboardLive) templates.DashboardLive {
	if h.deps.DB == nil {
		return v
	}
	rows, err := queries.New(h.deps.DB).DestinationCheckListProblems(ctx)
	if err != nil {
		h.deps.Logger.WarnContext(ctx, "read destination checks for the dashboard", slog.Any("error", err))
		return v
	}
	if len(rows) == 0 {
		return v
	}
	reasons := make([]templates.StatusReason, 0, len(rows)+len(v.Status.Reasons))
	for _, r := range rows {
		text := []rune("destination " + r.Destination + ": " + r.Problem)
		if len(text) > maxCheckText {
			text = append(text[:maxCheckText], '…')
		}
		reasons = append(reasons, templates.StatusReason{
			Text: string(text), Tone: "bad",
			Href: messagesHref(url.Values{"destination": {r.Destination}, "state": {"pending"}}),
		})
	}
	v.Status.Reasons = append(reasons, v.Status.Reasons...)
	v.Status.Level, v.Status.Tone = "Failing", "bad"
	return v
}
