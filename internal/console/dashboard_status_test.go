package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/stats"
)

// dashboardStatus says healthy, degraded or failing, and why, from the
// snapshot alone (issue 14, item 9).
func TestDashboardStatusSaysWhy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	running := []stats.Dispatcher{{Owner: "d1", HeartbeatAt: now.Add(-2 * time.Second)}}
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	deadAt := func(secondsAgo int) stats.Series {
		s := stats.Series{Dead: make([]int64, stats.SeriesSeconds)}
		s.Dead[len(s.Dead)-1-secondsAgo] = 3
		return s
	}
	for _, tc := range []struct {
		name    string
		s       stats.Snapshot
		stale   bool
		feed    changefeed.Status
		level   string
		reasons []string
		hrefs   []string
	}{
		{name: "quiet", s: stats.Snapshot{Dispatchers: running}, level: "Healthy"},
		{name: "open breaker first", level: "Failing",
			s:       stats.Snapshot{Dispatchers: running, Blocked: 2, Breakers: []stats.Breaker{{Destination: "shop", State: "open"}}},
			reasons: []string{"breaker open for shop", "2 blocked aggregates"},
			hrefs:   []string{"/messages?destination=shop&state=pending", "/aggregates/blocked"}},
		{name: "dead letters growing", level: "Degraded", s: stats.Snapshot{Dispatchers: running, Series: deadAt(10)},
			reasons: []string{"3 new dead letters in the last 5 min"}, hrefs: []string{"/dead-letters"}},
		{name: "old dead letters are not growth", level: "Healthy", s: stats.Snapshot{Dispatchers: running, Series: deadAt(400)}},
		{name: "lag", level: "Degraded", s: stats.Snapshot{Dispatchers: running, OldestPendingAt: at(3 * time.Minute)},
			reasons: []string{"lag 3 min (above 1 min)"}, hrefs: []string{"/messages?state=pending"}},
		{name: "long lag", level: "Failing", s: stats.Snapshot{Dispatchers: running, OldestPendingAt: at(11 * time.Minute)},
			reasons: []string{"lag 11 min (above 10 min)"}, hrefs: []string{"/messages?state=pending"}},
		{name: "silent dispatcher", level: "Failing",
			s:       stats.Snapshot{Dispatchers: []stats.Dispatcher{{Owner: "d2", HeartbeatAt: now.Add(-time.Minute)}}},
			reasons: []string{"dispatcher d2 without heartbeat for 1 min"}, hrefs: []string{"#dispatchers"}},
		{name: "nobody dispatches", level: "Failing",
			s:       stats.Snapshot{Flows: []stats.Flow{{Destination: "shop", Topic: "t", Queued: 4}}},
			reasons: []string{"no dispatcher running, 4 messages waiting"}, hrefs: []string{"#dispatchers"}},
		{name: "held-back inbox", level: "Degraded",
			s:       stats.Snapshot{Dispatchers: running, Inbox: []stats.Inbox{{Source: "stripe", Held: 2}}},
			reasons: []string{"inbox stripe holds 2 events back"}, hrefs: []string{"/inbox?source=stripe&status=held"}},
		{name: "statistics stopped", level: "Degraded", s: stats.Snapshot{Dispatchers: running}, stale: true,
			reasons: []string{"statistics not updating since 11:59:00 UTC"}, hrefs: []string{"/healthz"}},
		{name: "held-back feed", level: "Degraded", s: stats.Snapshot{Dispatchers: running},
			feed:    changefeed.Status{Open: 64, OldestOpen: 7, OldestOpenFor: 3 * time.Second, HeldBack: true},
			reasons: []string{"live feed held back by 64 open transactions"}, hrefs: []string{"#live-feed"}},
		{name: "feed reads fail", level: "Degraded", s: stats.Snapshot{Dispatchers: running},
			feed:    changefeed.Status{Err: "connection refused"},
			reasons: []string{"live feed not updating: its reads fail"}, hrefs: []string{"#live-feed"}},
		{name: "a long transaction holds nothing back", level: "Healthy", s: stats.Snapshot{Dispatchers: running},
			feed: changefeed.Status{Open: 1, OldestOpen: 41, OldestOpenFor: time.Hour}},
		{name: "held-back feed after the failing reasons", level: "Failing",
			s:       stats.Snapshot{Dispatchers: running, Breakers: []stats.Breaker{{Destination: "shop", State: "open"}}},
			feed:    changefeed.Status{Open: 70, HeldBack: true},
			reasons: []string{"breaker open for shop", "live feed held back by 70 open transactions"},
			hrefs:   []string{"/messages?destination=shop&state=pending", "#live-feed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := dashboardStatus(stats.Stored{Snapshot: tc.s, Version: 1, ComputedAt: now.Add(-time.Minute), ReadAt: now}, tc.stale, tc.feed)
			require.Equal(t, tc.level, st.Level)
			var reasons, hrefs []string
			for _, r := range st.Reasons {
				reasons, hrefs = append(reasons, r.Text), append(hrefs, r.Href)
			}
			require.Equal(t, tc.reasons, reasons)
			require.Equal(t, tc.hrefs, hrefs)
		})
	}
}

// The Dead tile's note counts its groups in words: "1 error group".
func TestCountOfSaysOneInTheSingular(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0 error groups", countOf(0, "error group"))
	require.Equal(t, "1 error group", countOf(1, "error group"))
	require.Equal(t, "12 error groups", countOf(12, "error group"))
}
