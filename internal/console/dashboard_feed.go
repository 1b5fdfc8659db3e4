package console

import (
	"fmt"
	"time"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/web/templates"
)

// FeedStatus reports how the process's change feed is doing: a
// *changefeed.Listener.
type FeedStatus interface {
	Status() changefeed.Status
}

// feedNoteAfter: a transaction open for less than this is ordinary (a
// dispatcher's claim, a request's write) and not worth a line.
const feedNoteAfter = 10 * time.Second

// withFeed adds to v what the dashboard says about the live feed: nothing
// while it is current; that it is held back (rows wait: too many open
// transactions, or reads fail) and by what; or, when a transaction has
// been open a while, that the feed still waits for that transaction's own
// changes, if it writes any (it delays nothing else).
func (h *Handler) withFeed(v templates.DashboardLive) templates.DashboardLive {
	if h.deps.Feed == nil {
		return v
	}
	v.Feed, v.FeedHeld = feedNote(h.deps.Feed.Status())
	return v
}

// feedStatus is the status of the process's change feed; the zero Status
// (current, nothing held) when it has none.
func (h *Handler) feedStatus() changefeed.Status {
	if h.deps.Feed == nil {
		return changefeed.Status{}
	}
	return h.deps.Feed.Status()
}

func feedNote(st changefeed.Status) (note string, held bool) {
	age := st.OldestOpenFor.Truncate(time.Second)
	switch {
	case st.Err != "":
		return "Live updates: reading the change feed fails; retrying (see the log)", true
	case st.HeldBack:
		return fmt.Sprintf("Live updates held back by %d open transactions; the oldest, xid %d, open for %s", st.Open, st.OldestOpen, age), true
	case st.Open > 0 && st.OldestOpenFor >= feedNoteAfter:
		return fmt.Sprintf("Live updates wait only for the changes of transaction xid %d, open for %s", st.OldestOpen, age), false
	}
	return "", false
}
