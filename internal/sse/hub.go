// Package sse streams the change feed to browsers as Server-Sent Events.
//
// One Hub per console process follows the process's one changefeed
// Listener and fans every change out to its clients. Each change is encoded
// once and shared; a client holds only a bounded queue of pointers to
// encoded events, so memory per client is bounded whatever the client does.
//
// # Events
//
// Every event's id is a feed position (changefeed.Position: "xid-id", then
// the transactions still open below it, ".xid" or ".xid-seen"): what the
// client has been delivered once it has the event, as a set, so that any
// instance can tell what the client lacks. The browser's EventSource
// sends the last one back as Last-Event-ID when it reconnects. A plain
// cursor would not do: the feed delivers a change as soon as it commits,
// while older transactions are still open, and their changes, when they
// commit, land behind the cursor; a client resuming from a cursor alone
// would skip them. The event name is the change's kind (a page listens with
// hx-trigger="sse:dead_letter"); the data is a JSON object with cursor,
// kind, subject, payload and at. Two more events:
//
//   - ready: the stream is live; its id is the position the client is
//     now current as of. Sent on connect, after any replay.
//   - resync: the client may have missed changes and must reload its live
//     regions from the database; its id is the position it is current as
//     of afterwards.
//
// A comment line (": heartbeat") is written every Heartbeat so that proxies
// and the browser keep an idle stream open.
//
// # Resume and resync rules
//
// A client that connects with Last-Event-ID C:
//
//   - C not a position, or not within the hub's own (another database, a
//     position from the future, an instance that has not yet read what
//     the client has: changefeed.ErrNotWithin): resync. Positions of two
//     instances that differ only in unrelated transactions (one saw one
//     end, the other not yet) resume: Since checks that it wrote nothing.
//   - C the position of an event in the hub's in-memory ring of recent
//     changes: the changes after it are replayed from memory, without a
//     query.
//   - otherwise (older than the ring, another instance's event): the
//     changes the hub has and C lacks, of the client's kinds and subjects,
//     are read once from the feed (changefeed.Since, one bounded index
//     walk per kind, so a filtered stream resumes across the whole
//     retention whatever the other kinds wrote). If they were pruned
//     (changefeed.ErrCursorExpired) or there are more than fit in the
//     client's queue (QueueSize): resync.
//
// A client whose queue overflows (it reads slower than changes arrive) has
// its queue emptied and receives resync in place of what was dropped: it is
// reset, never allowed to grow. A write that does not finish within
// WriteTimeout ends the stream (the browser reconnects and resumes).
//
// Streams must not pass through gzip or timeout middleware: a compressing
// writer buffers events, and a timeout cuts a stream that is meant to stay
// open for hours.
package sse

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// Feed is what the hub follows: a *changefeed.Listener.
type Feed interface {
	// Subscribe registers fn for every change the returned position lacks.
	Subscribe(fn changefeed.Subscriber) (changefeed.Position, func())
	// Since reads the changes upTo has and from lacks, of f, for a
	// resuming client.
	Since(ctx context.Context, from, upTo changefeed.Position, f changefeed.Filter, limit int) ([]changefeed.Change, error)
}

// Config configures a Hub. Zero fields take the documented defaults.
type Config struct {
	// Logger receives dropped streams and failed resumes. Default: discard.
	Logger *slog.Logger
	// QueueSize is the most events waiting for one client before it is
	// reset with resync. Default 256.
	QueueSize int
	// RingSize is how many recent changes the hub keeps to resume clients
	// without a query. Default 4096.
	RingSize int
	// Heartbeat is the interval of the keep-alive comment. Default 15s.
	Heartbeat time.Duration
	// WriteTimeout bounds each write to a client. Default 10s.
	WriteTimeout time.Duration
	// Retry is the reconnection delay the browser is told to use.
	// Default 2s.
	Retry time.Duration
	// ResumeTimeout bounds the read of a resuming client's missed changes.
	// Default 5s.
	ResumeTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 256
	}
	if c.RingSize <= 0 {
		c.RingSize = 4096
	}
	c.Heartbeat = orDefault(c.Heartbeat, 15*time.Second)
	c.WriteTimeout = orDefault(c.WriteTimeout, 10*time.Second)
	c.Retry = orDefault(c.Retry, 2*time.Second)
	c.ResumeTimeout = orDefault(c.ResumeTimeout, 5*time.Second)
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// event is one encoded SSE event, shared by every client that gets it.
type event struct {
	pos     changefeed.Position
	kind    string // "" for control events (resync)
	subject string
	wire    []byte
}

// client is one open stream.
type client struct {
	// queue holds the events waiting to be written. Only the hub sends to
	// it, with the hub's lock held; the stream's goroutine receives.
	queue    chan *event
	kinds    map[string]bool // nil: every kind
	subjects map[string]bool // nil: every subject
	filter   changefeed.Filter
}

// wants reports whether c asked for changes of this kind and subject.
func (c *client) wants(ev *event) bool {
	return (c.kinds == nil || c.kinds[ev.kind]) && (c.subjects == nil || c.subjects[ev.subject])
}

// Hub fans the feed out to SSE clients. Create it with New; Close it once.
type Hub struct {
	feed        Feed
	cfg         Config
	unsubscribe func()
	done        chan struct{} // closed by Close: every stream ends

	mu      sync.Mutex
	pos     changefeed.Position // guarded by mu: after the newest change published
	ring    []*event            // guarded by mu: recent changes, oldest first
	floor   changefeed.Position // guarded by mu: ring holds every change after it
	clients map[*client]struct{}
	closed  bool // guarded by mu
}

// New returns a hub that follows feed. The feed must be started.
func New(feed Feed, cfg Config) *Hub {
	h := &Hub{feed: feed, cfg: cfg.withDefaults(), done: make(chan struct{}), clients: map[*client]struct{}{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pos, h.unsubscribe = feed.Subscribe(h.publish)
	h.floor = h.pos
	return h
}

// Close ends every stream and stops following the feed. Handlers return
// promptly afterwards, so call it before waiting for the HTTP server to
// drain. It is safe to call more than once.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	h.mu.Unlock()
	// Outside h.mu: the feed calls publish (which takes h.mu) with its
	// own lock held, and unsubscribe takes that lock.
	h.unsubscribe()
}

// Clients returns the number of open streams.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// publish is the feed subscriber: it encodes each change once and queues
// it for every client that wants its kind and subject, resetting clients
// that are full.
func (h *Hub) publish(batch []changefeed.Change) {
	events := make([]*event, len(batch))
	for i, c := range batch {
		events[i] = encodeChange(c)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range events {
		h.remember(ev)
		for c := range h.clients {
			if !c.wants(ev) {
				continue
			}
			select {
			case c.queue <- ev:
			default:
				h.reset(c, ev.pos)
			}
		}
	}
}

// remember appends ev to the ring, dropping the oldest when full.
func (h *Hub) remember(ev *event) {
	h.pos = ev.pos
	if len(h.ring) == h.cfg.RingSize {
		h.floor = h.ring[0].pos
		h.ring[0] = nil
		h.ring = h.ring[1:]
	}
	h.ring = append(h.ring, ev)
}

// reset empties c's queue and puts resync as of pos in its place.
// Called with h.mu held: no event can be queued in between, and the
// stream's goroutine only takes events out, so there is room for it.
func (h *Hub) reset(c *client, pos changefeed.Position) {
	for {
		select {
		case <-c.queue:
			continue
		default:
		}
		break
	}
	c.queue <- encodeControl("resync", pos)
}

// changeData is the JSON data of a change event.
type changeData struct {
	// Cursor is the event's id, its position.
	Cursor  string          `json:"cursor"`
	Kind    string          `json:"kind"`
	Subject string          `json:"subject"`
	Payload json.RawMessage `json:"payload"`
	At      time.Time       `json:"at"`
}

func encodeChange(c changefeed.Change) *event {
	payload := c.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	id := c.Position.String()
	data, err := json.Marshal(changeData{Cursor: id, Kind: c.Kind, Subject: c.Subject, Payload: payload, At: c.CreatedAt})
	if err != nil {
		// The payload came from a jsonb column, so it is valid JSON; keep
		// the event (its id still matters) without it.
		data, _ = json.Marshal(changeData{Cursor: id, Kind: c.Kind, Subject: c.Subject, Payload: json.RawMessage("{}"), At: c.CreatedAt})
	}
	return &event{pos: c.Position, kind: c.Kind, subject: c.Subject, wire: frame(id, c.Kind, data)}
}

func encodeControl(name string, pos changefeed.Position) *event {
	return &event{pos: pos, wire: frame(pos.String(), name, []byte("{}"))}
}

// frame builds "id: …\nevent: …\ndata: …\n\n". JSON from encoding/json
// never contains a raw newline, so one data line is enough; kinds are
// checked by changefeed.Append and hold no newline either.
func frame(id, name string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(name)+len(id)+32)
	b = append(b, "id: "...)
	b = append(b, id...)
	b = append(b, "\nevent: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
