package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// The pages of the failures that triage items track (a dead-letter group,
// the blocked aggregates, a parked inbound event) show who is looking at
// each item, live, with the triage pages' presence component: a person on
// a failure's page counts as looking at its item, one on the list of
// blocked aggregates looks at none of its rows.
func TestTriageWhoIsLookingOnTheFailurePages(t *testing.T) {
	t.Parallel()
	pool, svc, procs := triageInstances(t, 1)
	console := withAccounts{Process: procs[0], svc: svc, pool: pool}
	t.Cleanup(func() { console.Stop(t) })
	ctx := context.Background()
	deadMessages(t, pool, 1, `{"order":61}`)
	var head, event int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO switchyard.outbox
		(topic, destination, aggregate_type, aggregate_id, payload, state, attempts, last_error, error_fingerprint, finished_at)
		VALUES ('orders.created', 'billing', 'order', 'o-6', '{"order":62}', 'dead', 3, 'HTTP 422: rejected', 'fp-422', now())
		RETURNING id`).Scan(&head))
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		VALUES ('billing', 'order', 'o-6', $1)`, head)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status, attempts, last_error, error_fingerprint)
		VALUES ('shop', 'evt_parked', '{"a": 1}', 'parked', 5, 'handler panicked: boom', 'handler panicked') RETURNING id`).Scan(&event))
	itemOf := func(kind string) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM switchyard.triage_items WHERE kind = $1`, kind).Scan(&id))
		return id
	}
	expect := newExpect()
	live := playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(expectTimeout)}
	exactly := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(expectTimeout)}

	// The dead-letter group: each side sees the other.
	group := itemOf("dead_letter_group")
	a := signedInAs(t, console, "operator", fmt.Sprintf("/triage/items/%d", group))
	require.NoError(t, expect.Locator(a.GetByTestId("triage-connection")).ToHaveText("Live", exactly))
	b := signedInAs(t, console, "viewer", "/dead-letters/fp-422")
	looking := b.GetByTestId("triage-looking")
	require.NoError(t, expect.Locator(looking).ToContainText("operator", live), "the group's page shows who looks at its item")
	require.NoError(t, expect.Locator(looking).ToContainText("viewer", live))
	require.NoError(t, expect.Locator(a.GetByTestId("item-presence")).ToContainText("viewer", live), "the group page's visitor looks at the item")
	_, err = b.Evaluate(`() => { window.e2eNotReloaded = true }`)
	require.NoError(t, err)
	require.NoError(t, a.GetByTestId("action-claim").Click())
	require.NoError(t, expect.Locator(b.GetByTestId("triage-claim")).ToContainText("operator until", live), "the claim shows live")
	requireNotReloaded(t, b)
	screenshot(t, b, "triage-looking-group")

	// The blocked aggregates: the row shows who looks at its item; the
	// list's visitor looks at none.
	blocked := itemOf("blocked_aggregate")
	_, err = a.Goto(fmt.Sprintf("/triage/items/%d", blocked))
	require.NoError(t, err)
	_, err = b.Goto("/aggregates/blocked")
	require.NoError(t, err)
	row := b.GetByTestId("blocked-row")
	require.NoError(t, expect.Locator(row.GetByTestId("item-presence")).ToHaveText("operator", exactly))
	require.NoError(t, expect.Locator(a.GetByTestId("item-presence")).ToHaveText("operator", exactly), "the list's visitor looks at no row")
	screenshot(t, b, "triage-looking-blocked")

	// A parked inbound event.
	parked := itemOf("inbox_failure_group")
	_, err = a.Goto(fmt.Sprintf("/triage/items/%d", parked))
	require.NoError(t, err)
	require.NoError(t, expect.Locator(row.GetByTestId("item-presence")).ToHaveText("nobody", exactly), "the operator left the blocked item")
	_, err = b.Goto(fmt.Sprintf("/inbox/events/%d", event))
	require.NoError(t, err)
	require.NoError(t, expect.Locator(b.GetByTestId("triage-looking")).ToContainText("operator", live))
	require.NoError(t, expect.Locator(a.GetByTestId("item-presence")).ToContainText("viewer", live))
	screenshot(t, b, "triage-looking-inbox")
}

// The holder of a claim closes the item's page: the socket closes with
// the page, and once the grace for a reload is over (5 s) the claim is
// released; B sees it go, live, with the reason in the history.
func TestTriageClaimReleasedWhenItsHoldersPageCloses(t *testing.T) {
	t.Parallel()
	pool, svc, procs := triageInstances(t, 1)
	console := withAccounts{Process: procs[0], svc: svc, pool: pool}
	t.Cleanup(func() { console.Stop(t) })
	deadMessages(t, pool, 1, `{"order":71}`)
	path := fmt.Sprintf("/triage/items/%d", triageItemID(t, pool))
	expect := newExpect()
	live := playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(expectTimeout)}

	b := signedInAs(t, console, "operator2", path)
	a := signedInAs(t, console, "operator", path)
	require.NoError(t, expect.Locator(a.GetByTestId("triage-connection")).ToHaveText("Live"))
	require.NoError(t, a.GetByTestId("action-claim").Click())
	require.NoError(t, expect.Locator(b.GetByTestId("item-claim")).ToContainText("operator until", live))
	require.NoError(t, expect.Locator(b.GetByTestId("item-presence")).ToContainText("operator,", live))

	require.NoError(t, a.Close())
	require.NoError(t, expect.Locator(b.GetByTestId("item-claim")).ToHaveText("unclaimed"), "released after the page closed")
	require.NoError(t, expect.Locator(b.GetByTestId("triage-history")).ToContainText("the holder's page closed", live))
	require.NoError(t, expect.Locator(b.GetByTestId("item-presence")).ToHaveText("operator2"))
	screenshot(t, b, "triage-released-on-close")
}
