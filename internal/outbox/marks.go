package outbox

import (
	"cmp"
	"sync"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// markAge is how long a dispatcher's unordered claims may start after
// their mark before one starts at the head of the destination's messages
// again: at most this long waits a message the mark went past while it
// was not claimable (leased by a dispatcher that died, or enqueued by a
// transaction that committed after the claims had passed its
// next_attempt_at), while claims keep draining a backlog behind it.
const markAge = time.Second

// unorderedMarks remembers, per destination, the last unordered message
// (next_attempt_at, id) this dispatcher's claims leased, so that the next
// claim starts after it instead of stepping over the messages in flight,
// which lead outbox_due_unordered (a third of a claim's time during a
// drain: migrations/00030_outbox_due_unordered_id.sql). Unordered messages
// promise no order, so a message behind the mark loses nothing but time,
// and little: a destination's mark is forgotten (its next claim starts at
// the head) when a claim there came back with fewer messages than it
// asked for (caught up: what is behind the mark is in flight, or due only
// now), when one of its messages went back to pending due at once
// (released, or retried without a delay), and when it is older than
// markAge.
type unorderedMarks struct {
	mu    sync.Mutex
	marks map[string]mark
	// forgets counts each destination's forgets: a claim that began
	// before one does not set a mark when it ends.
	forgets map[string]uint64
}

type mark struct {
	at    time.Time
	id    int64
	since time.Time // when a claim set it first, since it was last forgotten
}

// claimStart is where a claim starts, per destination, in the claim's
// parallel arrays.
type claimStart struct {
	at      []time.Time // year 1 (time.Time{}): at the head
	id      []int64
	forgets []uint64
}

// start returns where a claim of destinations starts.
func (u *unorderedMarks) start(destinations []string, now time.Time) claimStart {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := claimStart{at: make([]time.Time, len(destinations)), id: make([]int64, len(destinations)), forgets: make([]uint64, len(destinations))}
	for i, name := range destinations {
		m, ok := u.marks[name]
		if ok && now.Sub(m.since) >= markAge {
			u.forgetLocked(name)
			m = mark{}
		}
		s.at[i], s.id[i], s.forgets[i] = m.at, m.id, u.forgets[name]
	}
	return s
}

// claimed moves the marks on after a claim that started at s, asked for
// asked[i] messages of destinations[i], at most limit in all, and leased
// rows: to the last message leased of each destination. A destination
// that got less than it asked for, in a claim that the limit did not cut
// short, is caught up: its mark is forgotten.
func (u *unorderedMarks) claimed(destinations []string, asked []int32, limit int, s claimStart, rows []queries.OutboxClaimUnorderedRow, now time.Time) {
	last := make(map[string]mark, len(destinations))
	got := make(map[string]int32, len(destinations))
	for _, r := range rows {
		got[r.Destination]++
		m := mark{at: r.NextAttemptAt, id: r.ID}
		if l, ok := last[r.Destination]; !ok || compareMarks(m, l) > 0 {
			last[r.Destination] = m
		}
	}
	cut := len(rows) >= limit
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, name := range destinations {
		prev, ok := u.marks[name]
		m := last[name]
		switch {
		case u.forgets[name] != s.forgets[i]: // forgotten meanwhile
			continue
		case got[name] < asked[i] && !cut:
			u.forgetLocked(name)
			continue
		case got[name] == 0: // the limit left it out
			continue
		case !ok:
			m.since = now
		case compareMarks(prev, m) >= 0: // the mark is past it already (a guard: the dispatcher's claims take turns)
			continue
		default:
			m.since = prev.since
		}
		if u.marks == nil {
			u.marks = make(map[string]mark)
		}
		u.marks[name] = m
	}
}

// forget makes the next claim of destination start at the head.
func (u *unorderedMarks) forget(destination string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forgetLocked(destination)
}

func (u *unorderedMarks) forgetLocked(destination string) {
	delete(u.marks, destination)
	if u.forgets == nil {
		u.forgets = make(map[string]uint64)
	}
	u.forgets[destination]++
}

func compareMarks(a, b mark) int {
	return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.id, b.id))
}
