package changefeed

import (
	"time"
)

// Status is how a Listener is doing, for the dashboard and health pages.
type Status struct {
	// Position is what the Listener has delivered.
	Position Position
	// Open is how many transactions the Listener remembers as open: they
	// were in progress below changes it delivered, and their own changes,
	// if any, are delivered when they commit. They delay nothing else.
	Open int
	// OldestOpen is the oldest of them (its xid; 0: none), open for
	// OldestOpenFor as far as this Listener has seen.
	OldestOpen    uint64
	OldestOpenFor time.Duration
	// HeldBack: committed changes wait because more than MaxOpen
	// transactions are open below them; they wait for the oldest to end.
	HeldBack bool
	// LastRead is when the Listener last read the feed; Err is the error
	// of that read ("" when it succeeded).
	LastRead time.Time
	Err      string
}

// tracker keeps the Listener's Status between reads.
type tracker struct {
	held     bool
	lastRead time.Time
	err      string
	pos      Position
	// since is when each open transaction was first seen open.
	since map[uint64]time.Time
}

// recordRead records the outcome of a read.
func (l *Listener) recordRead(held bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status.read(held, err)
}

func (t *tracker) read(held bool, err error) {
	t.held, t.lastRead, t.err = held, time.Now(), ""
	if err != nil {
		t.err = err.Error()
	}
}

// open records the position after a read and when its open transactions
// were first seen.
func (t *tracker) open(pos Position) {
	t.pos = pos
	now := time.Now()
	seen := make(map[uint64]time.Time, len(pos.Open))
	for _, o := range pos.Open {
		first, ok := t.since[o.XID]
		if !ok {
			first = now
		}
		seen[o.XID] = first
	}
	t.since = seen
}

func (t *tracker) status(now time.Time) Status {
	s := Status{Position: t.pos, Open: len(t.pos.Open), HeldBack: t.held, LastRead: t.lastRead, Err: t.err}
	if s.Open > 0 {
		s.OldestOpen = t.pos.Open[0].XID
		s.OldestOpenFor = now.Sub(t.since[s.OldestOpen])
	}
	return s
}

// Status returns how the Listener is doing.
func (l *Listener) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.status(time.Now())
}
