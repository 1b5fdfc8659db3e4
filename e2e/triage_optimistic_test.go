package e2e

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// answersReceived counts the triage answers page's socket receives.
func answersReceived(page playwright.Page) *atomic.Int32 {
	var n atomic.Int32
	page.OnWebSocket(func(ws playwright.WebSocket) {
		ws.OnFrameReceived(func(payload []byte) {
			if strings.Contains(string(payload), `"type":"answer"`) {
				n.Add(1)
			}
		})
	})
	return &n
}

// A's change shows on A's page at once, as an overlay over the last
// confirmed state, while the server's answer is still on its way (the
// console holds each answer after its commit: the tests' ack delay); the
// ack then replaces it. B's change while A holds the claim shows at once
// too, and is rolled back, visibly and with the reason, when the reject
// arrives.
func TestTriageOverlayShowsBeforeTheAckAndRollsBackOnReject(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	pool, svc, procs := triageInstances(t, 1, "SWITCHYARD_TRIAGE_ACK_DELAY="+delay.String())
	console := withAccounts{Process: procs[0], svc: svc, pool: pool}
	t.Cleanup(func() { console.Stop(t) })
	deadMessages(t, pool, 1, `{"order":51}`)
	item := triageItemID(t, pool)
	path := fmt.Sprintf("/triage/items/%d", item)
	expect := newExpect()
	live := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(expectTimeout)}
	settled := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(expectTimeout)}

	b := signedInAs(t, console, "operator2", path)
	require.NoError(t, expect.Locator(b.GetByTestId("triage-connection")).ToHaveText("Live", live))
	a := signedInAs(t, console, "operator", path)
	answers := answersReceived(a)
	_, err := a.Reload() // the socket opens again, now observed
	require.NoError(t, err)
	require.NoError(t, expect.Locator(a.GetByTestId("triage-connection")).ToHaveText("Live", live))

	require.NoError(t, a.GetByTestId("action-claim").Click())
	require.NoError(t, expect.Locator(a.GetByTestId("item-overlay")).ToHaveText("Claiming…", live))
	require.Zero(t, answers.Load(), "the overlay shows before the ack")
	require.NoError(t, expect.Locator(a.GetByTestId("triage-item")).ToHaveClass("triage-item pending"))
	screenshot(t, a, "triage-overlay-before-ack")
	require.NoError(t, expect.Locator(a.GetByTestId("item-overlay")).ToHaveText("", settled))
	require.EqualValues(t, 1, answers.Load(), "the ack ended the overlay")
	require.NoError(t, expect.Locator(a.GetByTestId("item-claim")).ToContainText("operator until"))
	require.NoError(t, expect.Locator(a.GetByTestId("triage-item")).ToHaveClass("triage-item"))

	note := "the v2 schema is not deployed yet"
	require.NoError(t, a.GetByTestId("note-body").Fill(note))
	require.NoError(t, a.GetByTestId("action-note").Click())
	pendingNote := a.GetByTestId("note-pending")
	require.NoError(t, expect.Locator(pendingNote).ToContainText(note))
	require.NoError(t, expect.Locator(pendingNote).ToContainText("sending…"))
	require.EqualValues(t, 1, answers.Load(), "the greyed note shows before its ack")
	screenshot(t, a, "triage-note-before-ack")
	require.NoError(t, expect.Locator(pendingNote).ToHaveCount(0))
	require.EqualValues(t, 2, answers.Load())
	require.NoError(t, expect.Locator(a.Locator(`[data-testid="triage-notes"] .note-body`)).ToHaveText([]string{note}, live), "the note once, confirmed")

	// B's status change while A holds the claim: shown at once, then
	// refused and rolled back with the reason.
	_, err = b.GetByTestId("status-select").SelectOption(playwright.SelectOptionValues{Values: &[]string{"resolved"}})
	require.NoError(t, err)
	require.NoError(t, b.GetByTestId("action-status").Click())
	require.NoError(t, expect.Locator(b.GetByTestId("item-overlay")).ToHaveText("Setting status…", live))
	screenshot(t, b, "triage-overlay-before-reject")
	require.NoError(t, expect.Locator(b.GetByTestId("triage-error")).ToContainText("operator is working on this item"))
	require.NoError(t, expect.Locator(b.GetByTestId("triage-error")).ToContainText("(held by operator)"))
	require.NoError(t, expect.Locator(b.GetByTestId("item-overlay")).ToHaveText(""))
	require.NoError(t, expect.Locator(b.GetByTestId("item-status")).ToHaveText("open"))
	require.NoError(t, expect.Locator(b.GetByTestId("triage-item")).ToHaveClass("triage-item"))
	screenshot(t, b, "triage-rolled-back")
	require.Equal(t, "open", itemStatus(t, console, item))
}

func itemStatus(t *testing.T, console withAccounts, item int64) string {
	t.Helper()
	var status string
	require.NoError(t, console.pool.QueryRow(t.Context(), `SELECT status FROM switchyard.triage_items WHERE id = $1`, item).Scan(&status))
	return status
}
