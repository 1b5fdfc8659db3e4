package ws

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard/switchyard/internal/triage"
)

// handle acts on one client message; false when the socket must close.
func (c *conn) handle(ctx context.Context, data []byte) bool {
	m, ok := decode[clientMessage](c, data)
	if !ok {
		return true
	}
	switch m.Type {
	case "hello":
		return c.hello(ctx, m)
	case "mutate":
		in, ok := decode[triage.Input](c, data)
		if !ok {
			return true
		}
		return c.mutate(ctx, in)
	case "heartbeat":
		return c.heartbeat(ctx, m.Item)
	}
	return c.reply(noticeMessage{Type: "error", Message: "unknown message type " + m.Type})
}

// hello (re)subscribes the socket to what its page shows, joins its
// presence view and sends the current state of it all: the resync of
// every (re)connect and of a tab that became visible.
func (c *conn) hello(ctx context.Context, m clientMessage) bool {
	if len(m.Items) > maxHelloItems || (m.View != "board" && (m.View != "item" || len(m.Items) == 0)) {
		return c.reply(noticeMessage{Type: "error", Message: "hello: view board, or item with its item first; at most 500 items"})
	}
	view := triage.BoardView
	if m.View == "item" {
		view = triage.ItemView(m.Items[0])
	}
	items := make(map[int64]bool, len(m.Items))
	views := []string{view}
	for _, id := range m.Items {
		items[id] = true
		if m.View == "board" {
			views = append(views, triage.ItemView(id))
		}
	}
	c.mu.Lock()
	c.view, c.board, c.items, c.resync = view, m.View == "board", items, false
	clear(c.states)
	p := c.principal
	c.mu.Unlock()

	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := c.srv.cfg.Presence.Join(qctx, c.id, p, view)
	var states []triage.Item
	if err == nil {
		states, err = triage.GetMany(qctx, c.srv.cfg.Engine.Pool, m.Items)
	}
	var who map[string][]string
	if err == nil {
		who, err = c.srv.cfg.Presence.Who(qctx, views)
	}
	if err != nil {
		return c.reply(noticeMessage{Type: "error", Message: "hello: the database did not answer; send hello again"})
	}
	c.offer(states, who)
	return true
}

// mutate checks the session again (it may have ended, or its role
// changed, since the last check) and runs the mutation as the account it
// belongs to now; the engine checks the role.
func (c *conn) mutate(ctx context.Context, in triage.Input) bool {
	p, ok := c.session(ctx)
	if !ok {
		return false
	}
	in.RemoteAddr = c.addr
	mctx, cancel := context.WithTimeout(ctx, c.srv.cfg.MutationTimeout)
	defer cancel()
	a, err := c.srv.cfg.Engine.Mutate(mctx, p, in)
	if err != nil {
		// Nothing committed: the client resends the same mutation.
		return c.reply(noticeMessage{Type: "error", Message: "the mutation was not applied; send it again"})
	}
	return c.reply(answerMessage{Type: "answer", Answer: a})
}

func (c *conn) heartbeat(ctx context.Context, item int64) bool {
	c.mu.Lock()
	p := c.principal
	c.mu.Unlock()
	hctx, cancel := context.WithTimeout(ctx, c.srv.cfg.MutationTimeout)
	defer cancel()
	expires, err := c.srv.cfg.Engine.Heartbeat(hctx, p, item)
	if err != nil && !errors.Is(err, triage.ErrClaimLost) {
		return c.reply(noticeMessage{Type: "error", Message: "heartbeat: the database did not answer"})
	}
	m := heartbeatMessage{Type: "heartbeat", Item: item, OK: err == nil}
	if err == nil {
		m.ExpiresAt = &expires
	}
	return c.reply(m)
}

// offer hands the socket the states and presence it shows, coalesced
// with what already waits: per item, the newest version wins. Called by
// the fan-out and by hello; never blocks.
func (c *conn) offer(states []triage.Item, who map[string][]string) {
	c.mu.Lock()
	n := 0
	for _, it := range states {
		if !c.board && !c.items[it.ID] {
			continue
		}
		if old, ok := c.states[it.ID]; !ok || old.Version < it.Version {
			c.states[it.ID] = it
			n++
		}
	}
	for view, names := range who {
		if view == c.view || c.board {
			c.who[view] = names
			n++
		}
	}
	if len(c.states) > c.srv.cfg.MaxPending {
		clear(c.states)
		c.resync = true
	}
	c.mu.Unlock()
	if n > 0 {
		c.poke()
	}
}

// offerResync tells the client to read everything again.
func (c *conn) offerResync() {
	c.mu.Lock()
	clear(c.states)
	c.resync = true
	c.mu.Unlock()
	c.poke()
}

// write is the only writer of data frames: answers first (in order),
// then a resync or the coalesced states, then presence. Each write has
// its deadline; a failed one closes the socket.
func (c *conn) write(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.signal:
		}
		for _, msg := range c.take() {
			wctx, cancel := context.WithTimeout(ctx, c.srv.cfg.WriteTimeout)
			err := c.ws.Write(wctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
				c.ws.CloseNow()
				return
			}
		}
	}
}

// take empties what waits and returns it as encoded messages.
func (c *conn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.replies
	c.replies = nil
	if c.resync {
		out = append(out, encode(noticeMessage{Type: "resync"}))
		c.resync = false
	} else if len(c.states) > 0 {
		m := stateMessage{Type: "state", Items: make([]triage.Item, 0, len(c.states))}
		for _, it := range c.states {
			m.Items = append(m.Items, it)
		}
		out = append(out, encode(m))
		clear(c.states)
	}
	if len(c.who) > 0 {
		out = append(out, encode(presenceMessage{Type: "presence", Views: c.who}))
		c.who = map[string][]string{}
	}
	return out
}
