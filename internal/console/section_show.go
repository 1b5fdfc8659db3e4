package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/web/templates"
)

// section is a top-level page. Until its feature lands it shows an empty
// state that says what will be there.
type section struct {
	path     string
	id       templates.Section
	title    string
	subtitle string
	empty    templates.EmptyState
}

var sections = []section{
	{"/", templates.SectionDashboard, "Dashboard",
		"Delivery throughput, failures, lag and the health of every destination, live.",
		templates.EmptyState{Heading: "No traffic yet", Text: "Once services enqueue messages, their flow and failures appear here as they happen."}},
	{"/inbox", templates.SectionInbox, "Inbox",
		"Events received from outside, applied exactly once.",
		templates.EmptyState{Heading: "No inbound events", Text: "Events posted to /inbox/{source} will be listed here with duplicates and failures."}},
	{"/reconciliation", templates.SectionReconciliation, "Reconciliation",
		"Where our data and external systems disagree.",
		templates.EmptyState{Heading: "No findings", Text: "Reconciliation runs will list drift between our rows and external systems here."}},
}

func (h *Handler) sectionShow(s section) echo.HandlerFunc {
	return func(c echo.Context) error {
		return render(c, http.StatusOK, templates.SectionPage(h.page(s.title, s.id), s.subtitle, s.empty))
	}
}
