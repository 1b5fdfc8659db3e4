package ws

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/triage"
)

// Recheck checks the socket's session again (the request's cookie) and
// returns its principal as it is now; auth.ErrNoSession when the session
// has ended.
type Recheck func(ctx context.Context) (auth.Principal, error)

// conn is one socket. The reader goroutine (Serve's) handles client
// messages; the writer goroutine is the only one that writes data
// frames; offers from the fan-out only fill the pending state.
type conn struct {
	srv     *Server
	ws      *websocket.Conn
	id      uuid.UUID
	recheck Recheck
	addr    string        // the client's address, for audit rows
	signal  chan struct{} // cap 1: something waits to be written
	// closedByUs is set before the server closes the socket; cleanly is
	// set when the client closed it with a close frame (its page went
	// away), not the server, nor a dropped connection.
	closedByUs, cleanly atomic.Bool

	mu        sync.Mutex
	principal auth.Principal         // guarded by mu: as last checked
	view      string                 // guarded by mu: presence view; "" before hello and for a list
	page      int64                  // guarded by mu: the item whose page (or failure's page) this is; 0: none
	watch     map[string]bool        // guarded by mu: the presence views the page shows
	board     bool                   // guarded by mu: subscribed to every item
	items     map[int64]bool         // guarded by mu: subscribed items
	states    map[int64]*triage.Item // guarded by mu: latest state per item, to write (shared, read-only)
	who       map[string][]string    // guarded by mu: presence per view, to write
	replies   [][]byte               // guarded by mu: answers, to write in order
	resync    bool                   // guarded by mu: tell the client to read again
}

// maxReplies bounds the answers waiting for a slow client: the token
// bucket keeps an honest client far below it.
const maxReplies = 64

// Serve upgrades the request to a triage socket of principal p (the
// console authenticated the session cookie) and returns: the socket is
// served on a goroutine of its own until it closes (Stop closes it and
// waits for it). A foreign Origin is answered 403 and nothing is
// upgraded. addr is the client's address as the console sees it (behind
// trusted proxies, the forwarded one): the audit rows of the socket's
// mutations carry it. recheck must not use the request (its context
// ends when Serve returns).
//
// Serving the socket on the handler's goroutine would keep, for as long
// as the socket lives (hours, idle), the HTTP server's deep stack of the
// request, the request and the response with its buffer; returning lets
// them go, and the socket's buffers are sized for it (smallBuffers).
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, p auth.Principal, addr string, recheck Recheck) {
	// Counted under mu, where Stop cancels: a socket either is counted
	// before Stop waits, or sees the server stopped.
	s.mu.Lock()
	parent := s.ctx
	if parent == nil || parent.Err() != nil {
		s.mu.Unlock()
		http.Error(w, ErrNotStarted.Error(), http.StatusServiceUnavailable)
		return
	}
	s.running.Add(1)
	s.mu.Unlock()
	// The HTTP server's deadlines (if any) are for requests; the socket
	// sets its own on every write and finds dead peers by pings.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	sock, err := websocket.Accept(smallBuffers(w), r, &websocket.AcceptOptions{OriginPatterns: s.cfg.OriginPatterns})
	if err != nil {
		s.running.Done()
		s.cfg.Logger.Info("triage socket refused", slog.Any("error", err))
		return // Accept has answered (403 for a foreign Origin)
	}
	sock.SetReadLimit(s.cfg.ReadLimit)
	c := &conn{srv: s, ws: sock, id: uuid.New(), recheck: recheck, addr: addr, signal: make(chan struct{}, 1),
		principal: p, items: map[int64]bool{}, states: map[int64]*triage.Item{}, who: map[string][]string{}}
	go func() {
		defer s.running.Done()
		c.serve(parent)
	}()
}

// serve runs the socket: session watch, registration, writer, then the
// reader loop until the socket closes. The reader's context is the
// socket's own: ending the session or the server closes the socket with a
// close frame (guard), never by cancelling a read, which would cut the
// connection without saying why.
//
// An idle socket costs two goroutines, this reader and the writer: the
// guard runs only once the session ends (context.AfterFunc), and the
// writer's select also keeps the ping, recheck and refresh timers, whose
// work runs in a goroutine only while it is in flight.
func (c *conn) serve(parent context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	session, endSession := context.WithCancel(parent)
	defer endSession()
	if p := c.principal; p.SessionID != 0 && c.srv.cfg.Streams != nil {
		var stop func()
		session, stop = c.srv.cfg.Streams.Watch(session, p.SessionID, p.ExpiresAt)
		defer stop()
		// A revocation that committed before the watch started.
		if _, err := c.recheck(session); err != nil {
			c.close(StatusSessionEnded, "session ended")
			return
		}
	}
	c.srv.mu.Lock()
	c.srv.conns[c] = struct{}{}
	c.srv.mu.Unlock()
	defer c.leave()

	// Deferred after endSession and the watch's stop, so it runs before
	// them: the socket's own end is no session end.
	guarded := make(chan struct{})
	stopGuard := context.AfterFunc(session, func() {
		defer close(guarded)
		c.guard(session)
	})
	defer func() {
		if !stopGuard() {
			<-guarded // it had started: let it finish closing
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { c.write(ctx) })
	err := c.read(ctx)
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		c.cleanly.Store(!c.closedByUs.Load())
	}
}

// close closes the socket with code, noting that the server closed it.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.closedByUs.Store(true)
	c.ws.Close(code, reason)
}

// guard closes the socket once its session has ended (revoked on any
// instance, or expired) or the server stopped.
func (c *conn) guard(session context.Context) {
	cause := context.Cause(session)
	if errors.Is(cause, auth.ErrSessionRevoked) || errors.Is(cause, auth.ErrSessionExpired) {
		c.close(StatusSessionEnded, "session ended")
		return
	}
	c.close(websocket.StatusGoingAway, "console shutting down")
}

// leave unregisters the socket and removes its presence. If its page
// closed it (not the server, not a lost connection) and the page was an
// item's, the claim its account may hold on the item is released once
// they have not come back within ReleaseGrace: a crashed page's claim
// expires by its lease instead.
func (c *conn) leave() {
	c.srv.mu.Lock()
	delete(c.srv.conns, c)
	c.srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.cfg.Presence.Leave(ctx, c.id); err != nil {
		c.srv.cfg.Logger.Warn("remove a closed socket's presence", slog.Any("error", err))
	}
	c.ws.CloseNow()
	c.mu.Lock()
	p, item := c.principal, c.page
	c.mu.Unlock()
	if item != 0 && c.cleanly.Load() && p.Role.Allows(auth.Operator) {
		c.srv.releaseLater(p, item)
	}
}

// read handles client messages until the socket closes. A frame over
// the read limit makes Read fail and close the socket with 1009; a flood
// beyond the token bucket closes it with 1008.
func (c *conn) read(ctx context.Context) error {
	limit := rate.NewLimiter(c.srv.cfg.Rate, c.srv.cfg.Burst)
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == -1 && ctx.Err() == nil {
				c.srv.cfg.Logger.Debug("triage socket read", slog.Any("error", err))
			}
			return err
		}
		if !limit.Allow() {
			c.close(websocket.StatusPolicyViolation, "too many messages")
			return nil
		}
		if !c.handle(ctx, data) {
			return nil
		}
	}
}

// session checks the session again; on its end it closes the socket with
// StatusSessionEnded and reports false.
func (c *conn) session(ctx context.Context) (auth.Principal, bool) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := c.recheck(qctx)
	if err != nil {
		if errors.Is(err, auth.ErrNoSession) {
			c.close(StatusSessionEnded, "session ended")
			return auth.Principal{}, false
		}
		// The database did not answer: keep the last check's principal.
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.principal, ctx.Err() == nil
	}
	c.mu.Lock()
	c.principal = p
	c.mu.Unlock()
	return p, true
}

func (c *conn) refreshPresence(ctx context.Context) {
	c.mu.Lock()
	view, p := c.view, c.principal
	c.mu.Unlock()
	if view == "" {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.srv.cfg.Presence.Refresh(qctx, c.id, p, view); err != nil && ctx.Err() == nil {
		c.srv.cfg.Logger.Warn("refresh a socket's presence", slog.Any("error", err))
	}
}

// reply queues an answer for the writer; false (and the socket closes) if
// the client does not read its answers.
func (c *conn) reply(v any) bool {
	c.mu.Lock()
	full := len(c.replies) >= maxReplies
	if !full {
		c.replies = append(c.replies, encode(v))
	}
	c.mu.Unlock()
	if full {
		c.close(websocket.StatusPolicyViolation, "answers not read")
		return false
	}
	c.poke()
	return true
}

func (c *conn) poke() {
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// decode is a message's content, or a reply saying it was malformed.
func decode[T any](c *conn, data []byte) (T, bool) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		c.reply(noticeMessage{Type: "error", Message: "malformed message: " + err.Error()})
		return v, false
	}
	return v, true
}
