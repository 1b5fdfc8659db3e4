package sse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// ServeHTTP streams the feed to one client until it disconnects, the hub
// closes, or a write times out. Query parameter kind (repeatable) limits
// the stream to those kinds, and subject (repeatable) to changes of those
// subjects (a page of one message asks for that message's changes only:
// the hub filters in memory, so the page fetches nothing for the others);
// control events always come.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	c := &client{
		queue: make(chan *event, h.cfg.QueueSize), kinds: set(query["kind"]), subjects: set(query["subject"]),
		filter: changefeed.Filter{Kinds: query["kind"], Subjects: query["subject"]},
	}
	plan, ok := h.attach(c, r.Header.Get("Last-Event-ID"))
	if !ok {
		http.Error(w, "live updates are shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.detach(c)
	if plan.fromFeed {
		plan = h.resumeFromFeed(r.Context(), c, plan)
	}

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := stream{w: w, rc: http.NewResponseController(w), timeout: h.cfg.WriteTimeout}
	defer s.clearDeadline()

	first := [][]byte{[]byte("retry: " + strconv.FormatInt(h.cfg.Retry.Milliseconds(), 10) + "\n\n")}
	for _, ev := range plan.replay {
		first = append(first, ev.wire)
	}
	first = append(first, encodeControl(plan.control, plan.pos).wire)
	if err := s.write(first...); err != nil {
		h.dropped(r, err)
		return
	}
	if err := h.pump(r.Context(), c, &s); err != nil {
		h.dropped(r, err)
	}
}

// pump writes queued events and heartbeats until the stream ends.
func (h *Hub) pump(ctx context.Context, c *client, s *stream) error {
	heartbeat := time.NewTicker(h.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.done:
			return nil
		case ev := <-c.queue:
			if err := s.write(ev.wire); err != nil {
				return err
			}
		case <-heartbeat.C:
			if err := s.write([]byte(": heartbeat\n\n")); err != nil {
				return err
			}
		}
	}
}

func (h *Hub) dropped(r *http.Request, err error) {
	h.cfg.Logger.Info("live stream dropped", slog.String("remote_addr", r.RemoteAddr), slog.Any("error", err))
}

// plan is what a new client gets before live events.
type plan struct {
	replay   []*event
	control  string              // "ready" or "resync"
	pos      changefeed.Position // of the control event: the hub's
	fromFeed bool                // the replay must be read from the feed: from .. pos
	from     changefeed.Position
}

// attach registers c and decides, under the lock (so that no change
// published meanwhile is lost or doubled), what it gets first. ok is false
// once the hub is closed.
func (h *Hub) attach(c *client, lastEventID string) (p plan, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return plan{}, false
	}
	h.clients[c] = struct{}{}
	p = plan{control: "ready", pos: h.pos}
	if lastEventID == "" {
		return p, true
	}
	last, err := changefeed.ParsePosition(lastEventID)
	if err != nil || last.After.Compare(h.pos.After) > 0 {
		p.control = "resync"
		return p, true
	}
	if at, ok := h.inRing(last); ok {
		for _, ev := range h.ring[at:] {
			if c.wants(ev) {
				p.replay = append(p.replay, ev)
			}
		}
		if len(p.replay) > h.cfg.QueueSize {
			p.replay, p.control = nil, "resync"
		}
		return p, true
	}
	p.fromFeed, p.from = true, last
	return p, true
}

// inRing returns where in the ring the changes after pos begin, if pos is
// the hub's floor or the position of an event in the ring. Called with
// h.mu held.
func (h *Hub) inRing(pos changefeed.Position) (int, bool) {
	if pos.Equal(h.floor) {
		return 0, true
	}
	for i := len(h.ring) - 1; i >= 0; i-- {
		if h.ring[i].pos.Equal(pos) {
			return i + 1, true
		}
	}
	return 0, false
}

// resumeFromFeed reads what a client older than the ring (or from another
// instance) missed. Live events after p.pos queue meanwhile.
func (h *Hub) resumeFromFeed(ctx context.Context, c *client, p plan) plan {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ResumeTimeout)
	defer cancel()
	missed, err := h.feed.Since(ctx, p.from, p.pos, c.filter, h.cfg.QueueSize+1)
	if err != nil || len(missed) > h.cfg.QueueSize {
		if err != nil && !errors.Is(err, changefeed.ErrCursorExpired) && !errors.Is(err, changefeed.ErrNotWithin) {
			h.cfg.Logger.Warn("resume live stream failed; resync", slog.Any("error", err))
		}
		p.control = "resync"
		return p
	}
	for _, ch := range missed {
		if ev := encodeChange(ch); c.wants(ev) {
			p.replay = append(p.replay, ev)
		}
	}
	return p
}

// set is the values of a repeatable query parameter as a set; nil when
// there are none (no filter).
func set(values []string) map[string]bool {
	if len(values) == 0 {
		return nil
	}
	s := make(map[string]bool, len(values))
	for _, v := range values {
		s[v] = true
	}
	return s
}

func (h *Hub) detach(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
}

// stream writes to one client, each write under its own deadline.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *stream) write(chunks ...[]byte) error {
	// A writer without deadlines (ErrNotSupported: a wrapper that hides the
	// connection) could block forever on a stuck client: refuse to stream.
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return fmt.Errorf("sse: set write deadline: %w", err)
	}
	for _, b := range chunks {
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// clearDeadline leaves the connection as it found it, for keep-alive.
func (s *stream) clearDeadline() {
	_ = s.rc.SetWriteDeadline(time.Time{})
}
