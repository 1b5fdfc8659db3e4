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
	{"/messages", templates.SectionMessages, "Messages",
		"Every outbox message, filterable by state, topic, destination and aggregate.",
		templates.EmptyState{Heading: "No messages", Text: "Messages appear here as soon as a service writes one to the outbox."}},
	{"/dead-letters", templates.SectionDeadLetters, "Dead letters",
		"Messages that could not be delivered, grouped by error.",
		templates.EmptyState{Heading: "No dead letters", Text: "Nothing has failed for good. Failed messages will be grouped here by their error."}},
	{"/reconciliation", templates.SectionReconciliation, "Reconciliation",
		"Where our data and external systems disagree.",
		templates.EmptyState{Heading: "No findings", Text: "Reconciliation runs will list drift between our rows and external systems here."}},
	{"/audit", templates.SectionAudit, "Audit",
		"Who did what, when and why: every operator action and sign-in.",
		templates.EmptyState{Heading: "No recorded actions", Text: "Replays, repairs and sign-ins will be recorded here, append-only."}},
}

func (h *Handler) sectionShow(s section) echo.HandlerFunc {
	return func(c echo.Context) error {
		return render(c, http.StatusOK, templates.SectionPage(h.page(s.title, s.id), s.subtitle, s.empty))
	}
}
