package console

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/web/templates"
)

// inboxEventRetry is POST /inbox/events/:id/retry, from the event's page
// and from the list (action.RetryInboxEvent). It answers the retry's
// outcome (#inbox-outcome, out of band of the live regions) and makes the
// page's live region re-read the event (HX-Trigger inbox-changed); a
// refusal the operator can act on is shown in place.
func (h *Handler) inboxEventRetry(c echo.Context) error {
	id, err := inboxEventID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err == nil {
		var res inbox.Retried
		res, err = h.actions.RetryInboxEvent(c.Request().Context(), h.deps.DB, h.deps.Inbox, actor(c),
			action.InboxRetryInput{EventID: id, RequestID: rid, Reason: c.FormValue("reason")})
		if err == nil {
			c.Response().Header().Set("HX-Trigger", "inbox-changed")
			failedAgain := res.Outcome == inbox.OutcomeFailed || res.Outcome == inbox.OutcomeParked
			return render(c, http.StatusOK, templates.InboxOutcome(retryNotice(id, res), failedAgain, "", true))
		}
	}
	if msg := panelMessage(err); msg != "" {
		return render(c, http.StatusOK, templates.InboxOutcome("", false, msg, true))
	}
	return err
}

// retryNotice says what a retry did, naming the event.
func retryNotice(id int64, r inbox.Retried) string {
	what := fmt.Sprintf("Event %s/%s (#%d)", r.Source, r.EventID, id)
	again := ""
	if r.Existing {
		again = " (this request was already answered)"
	}
	switch r.Outcome {
	case inbox.OutcomeProcessed:
		return fmt.Sprintf("%s retried: processed, attempt %d%s.", what, r.Attempt, again)
	case inbox.OutcomeStale, inbox.OutcomeHeld:
		return fmt.Sprintf("%s retried: %s by its entity's version, attempt %d%s.", what, r.Outcome, r.Attempt, again)
	}
	return fmt.Sprintf("%s retried: failed again, attempt %d, now %s%s: %s", what, r.Attempt, r.Outcome, again, r.Error)
}
