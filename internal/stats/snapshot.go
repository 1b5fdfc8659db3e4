// Package stats computes the dashboard's statistics once per cluster and
// serves them to every viewer from one row.
//
// # Why
//
// Teams keep the dashboard open all day, so its cost must not grow with
// the number of viewers (ARCHITECTURE.md: dashboards never run COUNT(*)
// over the message tables per viewer). A Service runs in every `console
// serve`; one of them, the leader, holds a session advisory lock and, every
// Interval, computes a Snapshot from indexes and maintained tables:
//
//   - pending messages per destination and topic by state (queued, in
//     flight, retrying) and the oldest pending message: a bounded read of
//     the two claim indexes, both partial on state = 'pending', so the cost
//     follows the backlog, never the delivered history (capped at MaxRows;
//     a capped figure is shown as "at least");
//   - dead messages per destination and topic: recounted through the
//     partial index of dead messages only when dead_letter_groups (kept by
//     the finalize) says something changed;
//   - delivered, retried and dead per second: delivery_stats, which every
//     finalize writes. The leader keeps the last hour in memory and reads
//     only the last few seconds each tick;
//   - breakers (the latest breaker_events row per destination), dispatchers
//     and their heartbeats, blocked aggregates, inbox duplicates (all small
//     maintained tables), inbox events needing attention (a partial index)
//     and inbox events received (bounded, every few ticks);
//   - the newest outbox id (one backward probe of the primary key), which
//     the stats event also carries: the message list's "N new" control
//     asks the database only when it moved above the list's first row.
//
// It stores the Snapshot in switchyard.stats_snapshot and, when it differs
// from the last one, appends a change-feed row of kind "stats" in the same
// statement and sends the wake-up NOTIFY after commit (never inside a
// writer's transaction: invariant 9). Browsers subscribed to /events?kind=stats
// then fetch the dashboard's live region, which a Reader serves from an
// in-process copy of the row refreshed at most every CacheTTL. The database
// work is therefore per cluster per tick, whatever the number of viewers.
// A leader that dies releases its lock with its connection; another
// instance takes over within RetryInterval.
//
// Every statement's EXPLAIN is in EXPLAIN.md beside this file.
package stats

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// ChangeKind is the change-feed kind announcing a new snapshot.
const ChangeKind = changefeed.KindStats

// SeriesSeconds is how many seconds the dashboard's charts cover.
const SeriesSeconds = 15 * 60

// Snapshot is everything the dashboard shows, as of ComputedAt (database
// time). Slices are sorted, so equal figures marshal to equal bytes.
type Snapshot struct {
	// Flows: one row per destination and topic with anything to show.
	Flows []Flow `json:"flows"`
	// PendingCapped: the pending counts read MaxRows rows of an index
	// and stopped; the true counts are at least these.
	PendingCapped bool `json:"pending_capped,omitempty"`
	// DeadCapped: likewise for the dead counts.
	DeadCapped bool `json:"dead_capped,omitempty"`
	// OldestPendingAt is when the oldest pending message was enqueued;
	// nil when nothing is pending. Lag is the snapshot's time minus this.
	OldestPendingAt *time.Time `json:"oldest_pending_at,omitempty"`
	// DeadTotal and DeadGroups come from dead_letter_groups.
	DeadTotal  int64 `json:"dead_total"`
	DeadGroups int64 `json:"dead_groups"`
	// Series is delivered, retried and dead per second over the last
	// SeriesSeconds, ending at SeriesEnd (exclusive, unix seconds).
	Series      Series       `json:"series"`
	Breakers    []Breaker    `json:"breakers"`
	Dispatchers []Dispatcher `json:"dispatchers"`
	Blocked     int64        `json:"blocked_aggregates"`
	Inbox       []Inbox      `json:"inbox"`
	// InboxCapped: the inbox counts were capped at MaxRows.
	InboxCapped bool `json:"inbox_capped,omitempty"`
	// NewestOutboxID is the highest outbox id committed when the snapshot
	// was computed (0: none). Enqueues are not on the change feed (the hot
	// path sends no NOTIFY, invariant 9), so this is how an open message
	// list learns, from the stats event, that messages arrived above it.
	NewestOutboxID int64 `json:"newest_outbox_id"`
	// NewestDeliveryUS is when the latest delivery was, in microseconds
	// since the epoch (0: none), for the delivered list, which shows the
	// latest delivery first: a message below its first row's id may be
	// delivered after it.
	NewestDeliveryUS int64 `json:"newest_delivery_us"`
}

// Flow is the state of the messages of one destination and topic.
type Flow struct {
	Destination string `json:"destination"`
	Topic       string `json:"topic"`
	Queued      int64  `json:"queued"`    // pending, never attempted
	InFlight    int64  `json:"in_flight"` // leased by a dispatcher
	Retrying    int64  `json:"retrying"`  // pending after a failed attempt
	Dead        int64  `json:"dead"`
	// Delivered, Retried and DeadLastHour are outcomes in the last hour.
	Delivered    int64 `json:"delivered_1h"`
	Retried      int64 `json:"retried_1h"`
	DeadLastHour int64 `json:"dead_1h"`
}

// Series holds per-second totals over all destinations; index i is the
// second Start + i.
type Series struct {
	Start     int64   `json:"start"`
	Delivered []int64 `json:"delivered"`
	Retried   []int64 `json:"retried"`
	Dead      []int64 `json:"dead"`
}

func (s Series) empty() bool {
	for i := range s.Delivered {
		if s.Delivered[i] != 0 || s.Retried[i] != 0 || s.Dead[i] != 0 {
			return false
		}
	}
	return true
}

// Breaker is the latest reported state of a destination's circuit
// breaker. State is closed, open or half-open; "" when none was reported.
type Breaker struct {
	Destination string     `json:"destination"`
	State       string     `json:"state"`
	Owner       string     `json:"owner,omitempty"`
	ChangedAt   *time.Time `json:"changed_at,omitempty"`
}

// Dispatcher is one dispatcher instance.
type Dispatcher struct {
	Owner       string     `json:"owner"`
	Host        string     `json:"host"`
	PID         int32      `json:"pid"`
	Workers     int32      `json:"workers"`
	LeasesHeld  int32      `json:"leases_held"`
	StartedAt   time.Time  `json:"started_at"`
	HeartbeatAt time.Time  `json:"heartbeat_at"`
	StoppedAt   *time.Time `json:"stopped_at,omitempty"`
}

// Inbox is the state of one inbound source.
type Inbox struct {
	Source     string `json:"source"`
	Received   int64  `json:"received"`
	Duplicates int64  `json:"duplicates"`
	Failed     int64  `json:"failed"`
	Parked     int64  `json:"parked"`
	Stale      int64  `json:"stale"`
	Held       int64  `json:"held"`
}

// Stored is a Snapshot as read back from the database.
type Stored struct {
	Snapshot
	// Version increases with every stored snapshot; 0: none yet.
	Version    int64
	ComputedAt time.Time
	Leader     string
	// ReadAt is the database's time when the row was read; ages shown
	// to a viewer are measured against it.
	ReadAt time.Time
}

func decode(raw []byte) (Snapshot, error) {
	var s Snapshot
	if len(raw) == 0 {
		return s, nil
	}
	err := json.Unmarshal(raw, &s)
	return s, err
}
