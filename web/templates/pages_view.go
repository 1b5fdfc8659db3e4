package templates

import (
	"strconv"
	"time"
)

// MessageRow is one message in a list.
type MessageRow struct {
	ID            int64
	MessageID     string
	Topic         string
	Destination   string
	AggregateType string
	AggregateID   string
	State         string
	Attempts      int32
	Error         string // the last error, shortened for a table cell
	CreatedAt     time.Time
	FinishedAt    time.Time // zero: not delivered or dead yet
	ReplayOf      int64     // 0: not a replay
	// ReplayOutcome is, for a replayed message (State "replayed"), the
	// state of its newest replay; "" otherwise.
	ReplayOutcome string
}

// Pager links a keyset page to its neighbours; an empty URL means there is
// no page that way.
type Pager struct {
	NewerURL string
	OlderURL string
	// Searched says which ids a page searched when a filter that no
	// index serves limited it to a window; "" otherwise.
	Searched string
}

// MessageFilter is the message list's filter form, as the user typed it.
type MessageFilter struct {
	State         string
	Topic         string
	Destination   string
	AggregateType string
	AggregateID   string
	ID            string // message id (uuid, the idempotency key) or row id
	Error         string
	From          string // datetime-local, UTC
	To            string
	// Stage narrows to pending messages in one stage, as the dashboard
	// counts them: queued, in_flight or retrying.
	Stage string
	// LeasedBy narrows to the pending messages a dispatcher (its owner
	// name) holds in flight.
	LeasedBy string
}

// MessagesPage is the message browser.
type MessagesPage struct {
	Filter   MessageFilter
	Filtered bool // some filter is set: the empty state says so
	Rows     []MessageRow
	Pager    Pager
	// NewURL polls for messages above the first row; "" when the page is
	// not the first (new rows would not show on it anyway).
	NewURL string
	// NewAbove is the first row's id (0: no rows): the page asks NewURL
	// only when a stats event says the newest outbox id is above it. On
	// the delivered list (NewByDelivery) it is the first row's delivery
	// time in microseconds since the epoch, and the page asks when the
	// latest delivery is after it.
	NewAbove      int64
	NewByDelivery bool
	// FirstURL shows the newest matching messages (the "N new" link).
	FirstURL string
	// BulkReplayURL opens bulk replay filtered as this list is; "" when
	// the filter is not one a bulk replay takes, and then NoBulkReplay
	// says why (or nothing, for an unfiltered list).
	BulkReplayURL string
	NoBulkReplay  string
	// Total is how many messages match: exact when the list fits on this
	// page, else the planner's estimate. Nil: no total (the id filter).
	Total *ListTotal
	// ByDelivery: the rows are delivered messages, the latest delivery
	// first (not by id), and show when each was delivered.
	ByDelivery bool
}

// NewMessages is the "N new" control's content.
type NewMessages struct {
	Count    int64
	More     bool // at least Count; there may be more
	FirstURL string
}

// ListTotal is a list's total: Exact counts every matching row; otherwise
// Count estimates them (what an exact count would scan for) and reads
// "about N".
type ListTotal struct {
	Count int64
	Exact bool
}

// Label is the total's text: "1 message", "42 messages", "about 100,000
// messages" (an estimate, to two significant digits).
func (t ListTotal) Label() string {
	if t.Exact {
		if t.Count == 1 {
			return "1 message"
		}
		return thousands(t.Count) + " messages"
	}
	return "about " + thousands(twoDigits(t.Count)) + " messages"
}

// twoDigits rounds n to two significant digits: an estimate should not
// look more precise than it is.
func twoDigits(n int64) int64 {
	unit := int64(1)
	for n/unit >= 100 {
		unit *= 10
	}
	return (n + unit/2) / unit * unit
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Label is the control's text: "1 new message: show", "3 new messages:
// show", "100+ new messages: show".
func (n NewMessages) Label() string {
	switch {
	case n.More:
		return strconv.FormatInt(n.Count, 10) + "+ new messages: show"
	case n.Count == 1:
		return "1 new message: show"
	default:
		return strconv.FormatInt(n.Count, 10) + " new messages: show"
	}
}

// MessageDetail is one message with its history.
type MessageDetail struct {
	Row             MessageRow
	AggregateSeq    int64
	MaxAttempts     string
	NextAttemptAt   time.Time
	FinishedAt      *time.Time
	LeaseOwner      string
	LeaseVersion    int64
	LastError       string
	Fingerprint     string
	Payload         string // pretty-printed JSON, possibly truncated
	PayloadBytes    int
	PayloadTruncate bool
	// PayloadHidden: the reader may not see payloads (a viewer, unless the
	// console allows it); Payload then says so.
	PayloadHidden bool
	// CanDownload: the reader may download the raw payload (operators).
	CanDownload  bool
	Headers      []Header
	Attempts     []Attempt
	Replays      []MessageRow
	Siblings     []MessageRow // other messages of its aggregate, newest first
	AggregateURL string       // the message list filtered to its aggregate; "" without one
	InboxURL     string       // inbox events with the aggregate's key; "" without one
}

// Header is one message header; Value is its JSON text.
type Header struct {
	Name  string
	Value string
}

// Attempt is one delivery attempt.
type Attempt struct {
	Number       int32
	Worker       string
	LeaseVersion int64
	StartedAt    time.Time
	Outcome      string
	Applied      bool // false: the finalize was fenced off by a newer lease
	StatusCode   string
	Error        string
	Response     string
	DurationMs   float64
}

// DeadLetterGroup is one group of dead letters sharing an error
// fingerprint.
type DeadLetterGroup struct {
	Fingerprint  string
	Dead         int32
	FirstDeadAt  time.Time
	LastDeadAt   time.Time
	SampleID     int64
	SampleError  string
	Destinations []string
	// Trend is dead letters per hour, oldest first, over the last day.
	Trend []int32
}

// DeadLettersPage lists the groups.
type DeadLettersPage struct {
	Groups []DeadLetterGroup
	Pager  Pager
	// RegionURL refreshes the list region (the live update).
	RegionURL string
}

// DeadLetterGroupPage is one group and its messages.
type DeadLetterGroupPage struct {
	Group DeadLetterGroup
	Rows  []MessageRow
	Pager Pager
	// Triage is the group's triage item; nil if it has none.
	Triage *TriageItemView
}

// BlockedAggregate is an aggregate whose head is dead.
type BlockedAggregate struct {
	Destination   string
	AggregateType string
	AggregateID   string
	DeadMessageID int64
	BlockedAt     time.Time
	Waiting       int64 // pending messages behind the head, up to 1,000
	MessagesURL   string
	// Triage is the aggregate's triage item; nil if it has none.
	Triage *TriageItemView
	// Request ids of the row's Replay and Discard buttons: a double click
	// sends the same one.
	ReplayRequestID, DiscardRequestID string
}

// BlockedAggregatesPage lists the blocked aggregates.
type BlockedAggregatesPage struct {
	Rows  []BlockedAggregate
	Pager Pager
	// CanOperate shows the rows' replay and discard buttons and the bulk
	// replay of every blocked head.
	CanOperate bool
}

// ActionOutcome is what a row's action did (Notice) or why it was refused
// (Error).
type ActionOutcome struct {
	Notice, Error string
}
