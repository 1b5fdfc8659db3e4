package ws

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
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
	view, watch, ok := helloViews(m)
	if !ok {
		return c.reply(noticeMessage{Type: "error", Message: "hello: view board, list, or item with its item first; at most 500 items"})
	}
	items := make(map[int64]bool, len(m.Items))
	for _, id := range m.Items {
		items[id] = true
	}
	page := int64(0)
	if m.View == "item" {
		page = m.Items[0]
	}
	c.mu.Lock()
	c.view, c.board, c.items, c.watch, c.resync, c.page = view, m.View == "board", items, watch, false, page
	clear(c.states)
	p := c.principal
	c.mu.Unlock()

	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if view != "" {
		err = c.srv.cfg.Presence.Join(qctx, c.id, p, view)
	}
	var states []triage.Item
	if err == nil {
		states, err = triage.GetMany(qctx, c.srv.cfg.Engine.Pool, m.Items)
	}
	var who map[string][]string
	if err == nil {
		who, err = c.srv.cfg.Presence.Who(qctx, slices.Collect(maps.Keys(watch)))
	}
	if err != nil {
		return c.reply(noticeMessage{Type: "error", Message: "hello: the database did not answer; send hello again"})
	}
	c.offer(states, who)
	return true
}

// helloViews returns the presence view a hello joins ("" for a list,
// whose visitor looks at none of its items) and the views whose presence
// the page shows.
func helloViews(m clientMessage) (string, map[string]bool, bool) {
	if len(m.Items) > maxHelloItems {
		return "", nil, false
	}
	watch := make(map[string]bool, len(m.Items)+1)
	for _, id := range m.Items {
		watch[triage.ItemView(id)] = true
	}
	switch m.View {
	case "board":
		watch[triage.BoardView] = true
		return triage.BoardView, watch, true
	case "list":
		return "", watch, true
	case "item":
		if len(m.Items) == 0 {
			return "", nil, false
		}
		view := triage.ItemView(m.Items[0])
		return view, map[string]bool{view: true}, true
	}
	return "", nil, false
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
	if !c.holdAck(ctx) {
		return false
	}
	return c.reply(answerMessage{Type: "answer", Answer: a})
}

// holdAck waits Config.AckDelay (tests only; zero in production) before
// an answer is sent; false if the socket closed meanwhile.
func (c *conn) holdAck(ctx context.Context) bool {
	if c.srv.cfg.AckDelay <= 0 {
		return true
	}
	hold := time.NewTimer(c.srv.cfg.AckDelay)
	defer hold.Stop()
	select {
	case <-hold.C:
		return true
	case <-ctx.Done():
		return false
	}
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
// the fan-out and by hello; never blocks. It keeps pointers into states
// (one read, shared by every socket it is offered to), so the caller
// must not change them afterwards.
func (c *conn) offer(states []triage.Item, who map[string][]string) {
	c.mu.Lock()
	n := 0
	for i := range states {
		it := &states[i]
		if !c.board && !c.items[it.ID] {
			continue
		}
		if old, ok := c.states[it.ID]; !ok || old.Version < it.Version {
			c.states[it.ID] = it
			n++
		}
	}
	for view, names := range who {
		if c.board || c.watch[view] {
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
// its deadline; a failed one closes the socket. Its select also keeps the
// socket's timers: pings (a failed one closes the socket), the session's
// recheck (its end closes the socket) and the presence refresh. Each of
// those runs in a goroutine of its own while it is in flight, so a pong
// or a query never holds up the writes, and at most one of each kind runs
// at a time; write returns once those in flight have (ctx ends them).
func (c *conn) write(ctx context.Context) {
	cfg := c.srv.cfg
	ping := time.NewTicker(cfg.PingInterval)
	defer ping.Stop()
	recheck := time.NewTicker(cfg.RecheckInterval)
	defer recheck.Stop()
	refresh := time.NewTicker(cfg.PresenceRefresh)
	defer refresh.Stop()
	var tasks sync.WaitGroup
	defer tasks.Wait()
	var pinging, rechecking, refreshing atomic.Bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.signal:
			if !c.flush(ctx) {
				return
			}
		case <-ping.C:
			inFlight(&tasks, &pinging, func() { c.ping(ctx) })
		case <-recheck.C:
			inFlight(&tasks, &rechecking, func() { c.session(ctx) })
		case <-refresh.C:
			inFlight(&tasks, &refreshing, func() { c.refreshPresence(ctx) })
		}
	}
}

// inFlight runs f in a goroutine of tasks, unless the previous run of f
// (busy) has not returned yet.
func inFlight(tasks *sync.WaitGroup, busy *atomic.Bool, f func()) {
	if !busy.CompareAndSwap(false, true) {
		return
	}
	tasks.Go(func() {
		defer busy.Store(false)
		f()
	})
}

// flush writes what waits; false (and the socket is closed) when a write
// failed.
func (c *conn) flush(ctx context.Context) bool {
	for _, msg := range c.take() {
		wctx, cancel := context.WithTimeout(ctx, c.srv.cfg.WriteTimeout)
		err := c.ws.Write(wctx, websocket.MessageText, msg)
		cancel()
		if err != nil {
			c.ws.CloseNow()
			return false
		}
	}
	return true
}

// ping pings the client; a client that does not answer within the write
// timeout is gone, and its socket is closed.
func (c *conn) ping(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, c.srv.cfg.WriteTimeout)
	defer cancel()
	if err := c.ws.Ping(pctx); err != nil {
		c.ws.CloseNow()
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
		m := stateMessage{Type: "state", Items: make([]*triage.Item, 0, len(c.states))}
		for _, it := range c.states {
			m.Items = append(m.Items, it)
		}
		out = append(out, encode(m))
		clear(c.states)
	}
	if len(c.who) > 0 {
		out = append(out, encode(presenceMessage{Type: "presence", Views: c.who}))
		clear(c.who)
	}
	return out
}
