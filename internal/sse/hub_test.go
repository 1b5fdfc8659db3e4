package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestStreamHeadersAndReadyEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := connect(t, b.srv.URL, "", 0)
	require.Equal(t, "text/event-stream", c.resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", c.resp.Header.Get("Cache-Control"))
	require.Equal(t, "no", c.resp.Header.Get("X-Accel-Buffering"))
	ready := c.next(t, 5*time.Second)
	require.Equal(t, "ready", ready.name)
	require.Equal(t, b.hubPosition().String(), ready.id)

	b.commit(t, changefeed.KindDeadLetter, "m1")
	ev := c.next(t, 10*time.Second)
	require.Equal(t, changefeed.KindDeadLetter, ev.name)
	var data changeData
	require.NoError(t, json.Unmarshal([]byte(ev.data), &data))
	require.Equal(t, ev.id, data.Cursor)
	require.Equal(t, "m1", data.Subject)
	require.JSONEq(t, `{}`, string(data.Payload))
}

// Many fast and slow clients: every client ends converged on the last
// change, in strictly increasing cursor order; fast clients get every
// change, slow ones every change or a resync in place of what they missed.
func TestFanOutToManyFastAndSlowClients(t *testing.T) {
	t.Parallel()
	// The queue holds a whole burst; overflow itself is tested below,
	// deterministically (here socket buffers absorb a slow reader's lag).
	b := setup(t, Config{QueueSize: 256})
	const fast, slow, changes = 30, 10, 200
	var clients []*tclient
	for i := range fast + slow {
		delay := time.Duration(0)
		if i >= fast {
			delay = 2 * time.Millisecond
		}
		c := connect(t, b.srv.URL, "", delay)
		require.Equal(t, "ready", c.next(t, 5*time.Second).name)
		clients = append(clients, c)
	}
	errs := make(chan error, 4)
	testwait.Together(4, func(w int) {
		var err error
		for i := 0; i < changes/4/5 && err == nil; i++ {
			err = b.tryCommit("k", subjectsN(fmt.Sprintf("w%d-%d", w, i), 5)...)
		}
		errs <- err
	})
	for range 4 {
		require.NoError(t, <-errs)
	}

	all := b.cursors(t)
	for i, c := range clients {
		got := c.until(t, all, 20*time.Second)
		requireIncreasing(t, got)
		if i < fast || !slices.Contains(names(got), "resync") {
			require.Len(t, got, changes, "client %d gets every change", i)
		}
		if i < fast {
			require.NotContains(t, names(got), "resync", "fast client %d", i)
		}
	}
}

// untilCount collects n change events.
func (c *tclient) untilCount(t *testing.T, n int, limit time.Duration) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.Now().Add(limit)
	for len(got) < n {
		ev := c.next(t, time.Until(deadline))
		if ev.name != "ready" {
			got = append(got, ev)
		}
	}
	return got
}

func requireIncreasing(t *testing.T, events []sseEvent) {
	t.Helper()
	var prev changefeed.Position
	for i, ev := range events {
		cur, err := changefeed.ParsePosition(ev.id)
		require.NoError(t, err)
		if i > 0 {
			require.True(t, prev.Within(cur) && !prev.Equal(cur), "event %d: %s after %s", i, cur, prev)
		}
		prev = cur
	}
}

// A client that reconnects with Last-Event-ID gets what it missed, from
// the ring or (when the ring no longer reaches back) from the feed.
func TestResumeWithLastEventID(t *testing.T) {
	t.Parallel()
	for name, ring := range map[string]int{"from memory": 100, "from the feed": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{RingSize: ring})
			c := connect(t, b.srv.URL, "", 0)
			ready := c.next(t, 5*time.Second)
			b.commit(t, "k", "seen")
			seen := c.next(t, 10*time.Second)
			c.close()

			b.commit(t, "k", "missed-1", "missed-2")
			b.commit(t, "other", "missed-3")
			b.waitCaughtUp(t)

			again := connect(t, b.srv.URL, seen.id, 0)
			var subjects []string
			for range 3 {
				ev := again.next(t, 10*time.Second)
				var data changeData
				require.NoError(t, json.Unmarshal([]byte(ev.data), &data))
				subjects = append(subjects, data.Subject)
			}
			require.Equal(t, []string{"missed-1", "missed-2", "missed-3"}, subjects)
			require.Equal(t, "ready", again.next(t, 5*time.Second).name)

			filtered := connect(t, b.srv.URL+"?kind=other", ready.id, 0)
			ev := filtered.next(t, 10*time.Second)
			require.Equal(t, "other", ev.name, "only the kinds asked for are replayed")
			require.Equal(t, "ready", filtered.next(t, 5*time.Second).name)
		})
	}
}

func TestResyncForUnknownFutureOrExpiredCursors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RingSize: 1})
	c := connect(t, b.srv.URL, "", 0)
	old := c.next(t, 5*time.Second)
	b.commit(t, "k", "a", "b")
	c.untilCount(t, 2, 10*time.Second)

	for name, last := range map[string]string{
		"garbage": "not-a-cursor",
		"future":  changefeed.Cursor{XID: 1 << 62, ID: 1}.String(),
	} {
		ev := connect(t, b.srv.URL, last, 0).next(t, 5*time.Second)
		require.Equal(t, "resync", ev.name, name)
		require.Equal(t, b.hubPosition().String(), ev.id, name)
	}

	// Prune everything: the old cursor is now below the pruned one.
	_, err := b.pool.Exec(context.Background(), "UPDATE switchyard.changes SET created_at = now() - interval '2 days'")
	require.NoError(t, err)
	// Prune deletes settled changes only: other tests' transactions on the
	// server may hold the watermark back for a moment.
	var pruned int64
	testwait.Until(t, 10*time.Second, "both changes pruned", func() bool {
		n, err := changefeed.Prune(context.Background(), b.pool, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		pruned += n
		return pruned == 2
	})
	ev := connect(t, b.srv.URL, old.id, 0).next(t, 5*time.Second)
	require.Equal(t, "resync", ev.name, "expired")
}

// A client whose queue is full is reset: its queue is emptied and resync
// takes the place of what was dropped; memory stays bounded.
func TestOverflowingClientGetsResync(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{QueueSize: 4})
	c := &client{queue: make(chan *event, 4)}
	_, ok := b.hub.attach(c, "")
	require.True(t, ok)
	defer b.hub.detach(c)
	subjects := subjectsN("s", 10)
	b.commit(t, "k", subjects...) // one transaction: one batch
	b.waitCaughtUp(t)

	b.hub.mu.Lock()
	ring := append([]*event(nil), b.hub.ring...)
	b.hub.mu.Unlock()
	require.Len(t, ring, 10)
	// 1-4 queued, 5 overflows -> resync(5); 6-8 queued; 9 overflows ->
	// resync(9); 10 queued.
	require.Len(t, c.queue, 2)
	resync := <-c.queue
	require.Contains(t, string(resync.wire), "event: resync\n")
	require.True(t, ring[8].pos.Equal(resync.pos))
	require.Same(t, ring[9], <-c.queue)
}

func TestHeartbeatComment(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Heartbeat: 20 * time.Millisecond})
	c := connect(t, b.srv.URL, "", 0)
	deadline := time.After(10 * time.Second)
	for beats := 0; beats < 2; {
		select {
		case ev := <-c.events:
			if ev.comment == "heartbeat" {
				beats++
			}
		case <-deadline:
			t.Fatal("no heartbeat")
		}
	}
}

// stuckWriter is a ResponseWriter whose client never reads: every write
// blocks until the write deadline passes, as on a full socket.
type stuckWriter struct {
	header   http.Header
	mu       sync.Mutex
	deadline time.Time
	writes   int
}

func (w *stuckWriter) Header() http.Header { return w.header }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Flush()              {}
func (w *stuckWriter) SetWriteDeadline(d time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = d
	return nil
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	d := w.deadline
	w.writes++
	w.mu.Unlock()
	if d.IsZero() {
		return 0, errors.New("write without a deadline would block forever")
	}
	time.Sleep(time.Until(d)) // the socket blocks until the deadline
	return 0, os.ErrDeadlineExceeded
}

func TestStuckClientIsDroppedAtTheWriteDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{WriteTimeout: 100 * time.Millisecond})
	w := &stuckWriter{header: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.hub.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	}()
	testwait.For(t, 10*time.Second, "the stuck client's stream to end", done)
	require.Zero(t, b.hub.Clients())
}

func TestCloseEndsStreamsAndRefusesNewOnes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := connect(t, b.srv.URL, "", 0)
	c.next(t, 5*time.Second)
	require.Equal(t, 1, b.hub.Clients())
	b.hub.Close()
	b.hub.Close()
	testwait.For(t, 10*time.Second, "the stream to end after Close", c.done)
	resp, err := http.Get(b.srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

// A stream asking for subjects gets only the changes of those subjects,
// live and when it resumes: a message page hears of its own message only.
func TestSubjectFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := connect(t, b.srv.URL+"?kind=k&subject=42&subject=43", "", 0)
	ready := c.next(t, 5*time.Second)
	require.Equal(t, "ready", ready.name)

	b.commit(t, "k", "41", "42", "4200")
	b.commit(t, "other", "42")
	b.commit(t, "k", "43")
	got := func(c *tclient) []string {
		var subjects []string
		for range 2 {
			ev := c.next(t, 10*time.Second)
			var data changeData
			require.NoError(t, json.Unmarshal([]byte(ev.data), &data))
			subjects = append(subjects, ev.name+":"+data.Subject)
		}
		return subjects
	}
	require.Equal(t, []string{"k:42", "k:43"}, got(c))

	resumed := connect(t, b.srv.URL+"?kind=k&subject=42&subject=43", ready.id, 0)
	require.Equal(t, []string{"k:42", "k:43"}, got(resumed), "a resume replays the same subjects only")
	require.Equal(t, "ready", resumed.next(t, 5*time.Second).name)
}
