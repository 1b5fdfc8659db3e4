package templates

// Dashboard is the dashboard page: its live region, rendered in place on
// first load and fetched again on every statistics change.
type Dashboard struct {
	Live DashboardLive
	// DemoHref links the demo panel when `console demo` runs; "" otherwise.
	DemoHref string
}

// DashboardLive is everything the dashboard's live region shows; every
// figure is formatted by the handler.
type DashboardLive struct {
	// AsOf says when the figures were computed ("12:00:01 UTC"); "" when
	// no snapshot exists yet.
	AsOf string
	// Stale: the snapshot is older than a few seconds (no leader).
	Stale bool
	// Feed is a note on the live feed ("" while it is current), FeedHeld
	// whether changes wait (console.feedNote).
	Feed     string
	FeedHeld bool
	// NoTraffic: nothing has been enqueued or received yet.
	NoTraffic bool
	// Status is the one-line verdict above everything else.
	Status      DashboardStatus
	Tiles       []Tile
	Flows       []FlowRow
	Capped      bool
	Breakers    []BreakerRow
	Dispatchers []DispatcherRow
	Inbox       []InboxSourceRow
	// SeriesJSON is the per-second series for the charts, as JSON:
	// {"start": unix second, "delivered": [...], "retried": [...], "dead": [...]}.
	SeriesJSON string
}

// DashboardStatus is the dashboard's verdict: Healthy, Degraded or
// Failing, and why.
type DashboardStatus struct {
	Level   string // Healthy, Degraded, Failing
	Tone    string // ok, warn, bad
	Reasons []StatusReason
}

// StatusReason is one cause of a status, linking to the list behind it.
type StatusReason struct {
	Text, Href string
	Tone       string // warn, bad
}

// Tile is one headline figure.
type Tile struct {
	TestID string // data-testid, e.g. "stat-pending"
	Label  string
	Value  string
	Note   string
	Tone   string // "", ok, warn, bad
	// Href is the filtered list behind the figure.
	Href string
}

// FlowRow is one destination and topic.
type FlowRow struct {
	Destination, Topic                                string
	Queued, InFlight, Retrying, Dead, Delivered, Fail string
	// Href lists the row's messages; QueuedHref, InFlightHref and
	// RetryingHref its pending messages in one stage, DeadHref and
	// DeliveredHref those in one state.
	Href, QueuedHref, InFlightHref, RetryingHref, DeadHref, DeliveredHref string
}

// BreakerRow is one destination's circuit breaker.
type BreakerRow struct {
	Destination string
	State       string // closed, open, half-open, or "closed" when never reported
	Tone        string
	Since       string
	Owner       string
	Href        string // the destination's pending messages
}

// DispatcherRow is one dispatcher instance.
type DispatcherRow struct {
	Owner, Host  string
	Workers      string
	Leases       string
	HeartbeatAge string
	Status       string // running, late, stopped
	Tone         string
	Href         string // the messages it holds in flight
}

// InboxSourceRow is one inbound source.
type InboxSourceRow struct {
	Source, Href                                      string
	Received, Duplicates, Failed, Parked, Stale, Held string
	// Hrefs lists the source's events by status ("failed", "duplicates",
	// ...).
	Hrefs map[string]string
}
