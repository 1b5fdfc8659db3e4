package ws

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/internal/triage"
)

// claimOnItemPage opens name's socket on the page of it, claims it and
// returns the socket.
func (e *env) claimOnItemPage(t *testing.T, name string, it triage.Item) *client {
	t.Helper()
	c := e.dial(t, e.signIn(t, name, auth.Operator))
	c.send(map[string]any{"type": "hello", "view": "item", "items": []int64{it.ID}})
	c.send(mutation(it, triage.OpClaim, triage.Args{}))
	a := c.await(5*time.Second, "the claim's answer", func(m message) bool { return m.Type == "answer" })
	require.True(t, a.Answer.OK, a.Answer.Message)
	return c
}

func (e *env) holder(t *testing.T, id int64) string {
	t.Helper()
	it, err := triage.Get(context.Background(), e.pool, id)
	require.NoError(t, err)
	return it.ClaimHolder
}

// A claim is released when its holder's page closes (the socket closes
// cleanly with the page), once the grace for a reload has passed; the
// history says why. A page that crashed (its connection dropped without a
// close frame) keeps its claim until the lease expires; one that comes
// still open on the item (a reload's, the failure's page) keeps it too.
func TestClaimReleasedWhenItsHoldersPageCloses(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{ReleaseGrace: 200 * time.Millisecond})
	crashed, closed, reloaded := e.item(t, "crashed"), e.item(t, "closed"), e.item(t, "reloaded")

	e.claimOnItemPage(t, "carol", crashed).ws.CloseNow()
	testwait.Until(t, 5*time.Second, "the crashed socket to leave", func() bool { return e.srv.Clients() == 0 })

	// Rita's other page on the item (as a reload's new page, or the
	// failure's page) is open when the first closes.
	r := e.claimOnItemPage(t, "rita", reloaded)
	session, err := e.auth.Login(context.Background(), "rita", password, "127.0.0.1")
	require.NoError(t, err)
	again := e.dial(t, session)
	again.send(map[string]any{"type": "hello", "view": "item", "items": []int64{reloaded.ID}})
	again.await(5*time.Second, "rita's other page on the item", func(m message) bool { return m.Type == "presence" })
	require.NoError(t, r.ws.Close(websocket.StatusGoingAway, "reload"))

	c := e.claimOnItemPage(t, "dave", closed)
	require.NoError(t, c.ws.Close(websocket.StatusGoingAway, "page closed"))
	testwait.Until(t, 10*time.Second, "dave's claim released", func() bool { return e.holder(t, closed.ID) == "" })
	var reason string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT detail->>'reason' FROM switchyard.triage_events
		WHERE item_id = $1 AND op = 'release' AND actor = 'dave'`, closed.ID).Scan(&reason))
	require.Equal(t, releaseReason, reason)

	// The crash and rita's page closed before dave's page: had either
	// been released, it would have been by now.
	require.Equal(t, "carol", e.holder(t, crashed.ID), "a crashed page's claim waits for its lease")
	require.Equal(t, "rita", e.holder(t, reloaded.ID), "a holder still on the item keeps the claim")
	var releases int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.triage_events WHERE op = 'release'`).Scan(&releases))
	require.Equal(t, 1, releases)
}
