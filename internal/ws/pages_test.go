package ws

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/triage"
)

// A page of rows of items ("list", the blocked aggregates) shows who is
// looking at each item and each item's new state, and its visitor looks
// at none of them; the page of the failure one item tracks says hello as
// that item's page does, so its visitor counts as looking at the item.
func TestListShowsWhoLooksAtEachItemWithoutLookingItself(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	first, second := e.item(t, "first"), e.item(t, "second")
	list := e.dial(t, e.signIn(t, "lister", auth.Viewer))
	list.send(map[string]any{"type": "hello", "view": "list", "items": []int64{first.ID, second.ID}})
	list.await(5*time.Second, "nobody on either item", func(m message) bool {
		return m.Type == "presence" && m.Views[triage.ItemView(first.ID)] != nil && len(m.Views[triage.ItemView(first.ID)]) == 0 &&
			m.Views[triage.ItemView(second.ID)] != nil && len(m.Views[triage.ItemView(second.ID)]) == 0
	})

	looker := e.dial(t, e.signIn(t, "looker", auth.Operator))
	looker.send(map[string]any{"type": "hello", "view": "item", "items": []int64{second.ID}})
	m := looker.await(5*time.Second, "the looker on the second item", func(m message) bool {
		return m.Type == "presence" && slices.Contains(m.Views[triage.ItemView(second.ID)], "looker")
	})
	require.Equal(t, []string{"looker"}, m.Views[triage.ItemView(second.ID)], "the list's visitor looks at none")
	list.await(5*time.Second, "the looker on the list's row", func(m message) bool {
		return m.Type == "presence" && slices.Contains(m.Views[triage.ItemView(second.ID)], "looker")
	})
	looker.send(mutation(second, triage.OpClaim, triage.Args{}))
	list.await(5*time.Second, "the row's new state", func(m message) bool {
		return m.Type == "state" && len(m.Items) == 1 && m.Items[0].ID == second.ID && m.Items[0].ClaimHolder == "looker"
	})
	who, err := e.presence.Who(t.Context(), []string{triage.BoardView, triage.ItemView(first.ID)})
	require.NoError(t, err)
	require.Empty(t, who[triage.BoardView])
	require.Empty(t, who[triage.ItemView(first.ID)])
}

// With an ack delay (a tests-only hook) the answer comes that long after
// the commit: another client sees the change first.
func TestAckDelayHoldsTheAnswerAfterTheCommit(t *testing.T) {
	t.Parallel()
	const delay = 500 * time.Millisecond
	e := setup(t, Config{AckDelay: delay})
	it := e.item(t, "slow")
	other := e.dial(t, e.signIn(t, "other", auth.Viewer))
	other.send(map[string]any{"type": "hello", "view": "item", "items": []int64{it.ID}})
	other.await(5*time.Second, "the item's state", func(m message) bool { return m.Type == "state" })
	c := e.dial(t, e.signIn(t, "alice", auth.Operator))
	sent := time.Now()
	c.send(mutation(it, triage.OpClaim, triage.Args{}))
	other.await(5*time.Second, "the claim, from the change feed", func(m message) bool {
		return m.Type == "state" && len(m.Items) == 1 && m.Items[0].ClaimHolder == "alice"
	})
	a := c.await(5*time.Second, "the answer", func(m message) bool { return m.Type == "answer" })
	require.True(t, a.Answer.OK)
	require.GreaterOrEqual(t, time.Since(sent), delay)
}
