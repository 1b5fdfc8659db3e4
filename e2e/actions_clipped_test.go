package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/audit"
)

// A reason as long as an action takes is shown cut on the Audit page,
// escaped; opening it shows the whole.
func TestAuditShowsALongReasonCutWithTheWholeBehindIt(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	reason := "<b>not bold</b> " + strings.Repeat("the validator rejected totals over 10; ", 14)
	reason = reason[:action.MaxReasonChars-4] + " END"
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, console.pool, func(tx pgx.Tx) error {
		_, err := audit.Record(ctx, tx, audit.Entry{Actor: "operator", Action: "message.discard", Target: "message 1", Reason: reason, Outcome: audit.OK})
		return err
	}))
	page := signedIn(t, console, "admin", "/audit?action=message.discard")
	expect := newExpect()
	clipped := page.GetByTestId("clipped")
	require.NoError(t, expect.Locator(clipped).ToHaveCount(1))
	require.NoError(t, expect.Locator(clipped.Locator("summary")).ToContainText("<b>not bold</b>"))
	require.NoError(t, expect.Locator(clipped.Locator("span")).ToBeHidden())
	screenshot(t, page, "audit-reason-clipped")

	require.NoError(t, clipped.Locator("summary").Click())
	require.NoError(t, expect.Locator(clipped.Locator("span")).ToBeVisible())
	require.NoError(t, expect.Locator(clipped.Locator("span")).ToHaveText(reason))
	require.NoError(t, expect.Locator(page.Locator("b")).ToHaveCount(0), "the reason is text, not markup")
	screenshot(t, page, "audit-reason-open")
}
