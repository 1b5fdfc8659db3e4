package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/testwait"
)

// Two operators, each in a browser of their own, work one triage item:
// B sees A arrive, claim it, write a note and change its status, live and
// without a reload; B's own status change while A holds the claim is
// shown at once, then rolled back with the reason. The board shows the
// item's new state too.
func TestTriageTwoOperatorsWorkOneItemLive(t *testing.T) {
	t.Parallel()
	console := startConsoleForActions(t)
	require.NoError(t, console.svc.AddUser(context.Background(), auth.CLI, "operator2", auth.Operator, e2ePassword))
	deadMessages(t, console.pool, 2, `{"order":31}`)
	var item int64
	require.NoError(t, console.pool.QueryRow(context.Background(),
		`SELECT id FROM switchyard.triage_items WHERE kind = 'dead_letter_group'`).Scan(&item))
	path := fmt.Sprintf("/triage/items/%d", item)
	expect := newExpect()
	soon := playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(expectTimeout)}

	b := signedInAs(t, console, "operator2", path)
	require.NoError(t, expect.Locator(b.GetByTestId("triage-connection")).ToHaveText("Live"))
	_, err := b.Evaluate(`() => { window.e2eNotReloaded = true }`)
	require.NoError(t, err)
	a := signedInAs(t, console, "operator", path)
	require.NoError(t, expect.Locator(a.GetByTestId("triage-connection")).ToHaveText("Live"))
	require.NoError(t, expect.Locator(b.GetByTestId("item-presence")).ToContainText("operator,", soon), "B sees A looking")

	require.NoError(t, a.GetByTestId("action-claim").Click())
	require.NoError(t, expect.Locator(a.GetByTestId("item-claim")).ToContainText("operator until", soon))
	require.NoError(t, expect.Locator(b.GetByTestId("item-claim")).ToContainText("operator until", soon), "B sees A's claim")

	// After its own note, A's page reads itself again (twice: on the
	// note's ack, and once more), and that read may land while A picks
	// the next status: on a loaded machine it did, and A's click sent
	// the fresh select's first status, not the one A picked. Here the
	// first read is held until A has picked, then let go.
	refreshHeld, letGo := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(letGo) })
	t.Cleanup(release)
	var hold sync.Once
	require.NoError(t, a.Route("**"+path, func(r playwright.Route) {
		hold.Do(func() {
			close(refreshHeld)
			<-letGo
		})
		_ = r.Continue() // fails only when the page is gone: the assertions below report it
	}))
	note := "<b>upstream</b> rejects v2 orders"
	require.NoError(t, a.GetByTestId("note-body").Fill(note))
	require.NoError(t, a.GetByTestId("action-note").Click())
	require.NoError(t, expect.Locator(b.GetByTestId("triage-notes")).ToContainText(note, soon), "B sees A's note, as text")
	require.NoError(t, expect.Locator(b.Locator(`[data-testid="triage-notes"] b`)).ToHaveCount(0))

	testwait.For(t, 30*time.Second, "A's page to read itself again after its note", refreshHeld)
	_, err = a.GetByTestId("status-select").SelectOption(playwright.SelectOptionValues{Values: &[]string{"investigating"}})
	require.NoError(t, err)
	_, err = a.Evaluate(`() => { document.querySelector('[data-testid="status-select"]').dataset.e2ePicked = "" }`)
	require.NoError(t, err)
	release()
	require.NoError(t, expect.Locator(a.Locator(`[data-testid="status-select"]:not([data-e2e-picked])`)).ToHaveCount(1), "A's page read itself again")
	require.NoError(t, expect.Locator(a.GetByTestId("status-select")).ToHaveValue("investigating"), "A's pick survives the read")
	require.NoError(t, a.GetByTestId("action-status").Click())
	require.NoError(t, expect.Locator(b.GetByTestId("item-status")).ToHaveText("investigating"), "B sees A's status")
	require.NoError(t, expect.Locator(b.GetByTestId("triage-history")).ToContainText("operator status", soon))

	// B's change while A holds the claim: refused, rolled back, explained.
	_, err = b.GetByTestId("status-select").SelectOption(playwright.SelectOptionValues{Values: &[]string{"resolved"}})
	require.NoError(t, err)
	require.NoError(t, b.GetByTestId("action-status").Click())
	require.NoError(t, expect.Locator(b.GetByTestId("triage-error")).ToContainText("operator is working on this item", soon))
	require.NoError(t, expect.Locator(b.GetByTestId("item-status")).ToHaveText("investigating"))
	require.NoError(t, expect.Locator(b.GetByTestId("item-overlay")).ToHaveText(""))
	requireNotReloaded(t, b)
	screenshot(t, a, "triage-item")

	board := signedInAs(t, console, "viewer", "/triage")
	card := board.Locator(fmt.Sprintf(`[data-item-id="%d"]`, item))
	require.NoError(t, expect.Locator(card.GetByTestId("item-status")).ToHaveText("investigating"))
	require.NoError(t, expect.Locator(card.GetByTestId("item-claim")).ToContainText("operator until"))
	require.NoError(t, expect.Locator(board.GetByTestId("board-presence")).ToContainText("viewer", soon))
	require.NoError(t, a.GetByTestId("action-release").Click())
	require.NoError(t, expect.Locator(card.GetByTestId("item-claim")).ToHaveText("unclaimed"), "the board follows live")
	screenshot(t, board, "triage-board")
}
