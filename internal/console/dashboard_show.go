package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/stats"
	"github.com/switchyard/switchyard/web/templates"
)

// StatsSource serves the stored dashboard statistics: a *stats.Reader.
type StatsSource interface {
	Get(ctx context.Context) (stats.Stored, error)
	// GetAtLeast returns version minVersion or later; fresh: read after
	// the call began.
	GetAtLeast(ctx context.Context, minVersion int64, fresh bool) (stats.Stored, error)
}

// staleAfter: a snapshot older than this has no leader computing it (a
// leader records that it is alive every 5 s, see internal/stats).
const staleAfter = 15 * time.Second

// dashboardShow renders the dashboard page with its live region in place.
func (h *Handler) dashboardShow(c echo.Context) error {
	live, err := h.dashboardLiveView(c.Request().Context())
	if err != nil {
		return err
	}
	d := templates.Dashboard{Live: live}
	if h.deps.DemoPanel != nil {
		d.DemoHref = "/demo"
	}
	return render(c, http.StatusOK, templates.DashboardPage(h.page("Dashboard", templates.SectionDashboard), d))
}

// dashboardLive renders the live region alone, for htmx refreshes. Every
// open dashboard asks for it on every statistics change, so the rendered
// bytes are shared: rendered once per snapshot version and second (ages
// are shown in whole seconds), whatever the number of viewers.
func (h *Handler) dashboardLive(c echo.Context) error {
	ctx := c.Request().Context()
	// dashboard.js sends the version the stats event announced (v) and
	// asks for a fresh read after the stream (re)connected (fresh=1).
	v, _ := strconv.ParseInt(c.QueryParam("v"), 10, 64)
	body, err := h.live.get(ctx, h.deps.Stats, v, c.QueryParam("fresh") == "1", func(s stats.Stored) ([]byte, error) {
		var buf bytes.Buffer
		err := templates.DashboardLiveRegion(h.withConfigChecks(ctx, h.withFeed(dashboardView(s, h.feedStatus())))).Render(ctx, &buf)
		return buf.Bytes(), err
	})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(http.StatusOK, body)
}

// liveCache holds the last rendered live region and what it was rendered
// from. Safe for concurrent use.
type liveCache struct {
	mu      sync.Mutex
	version int64  // guarded by mu
	second  int64  // guarded by mu; ReadAt's unix second
	body    []byte // guarded by mu; nil: nothing cached
}

func (l *liveCache) get(ctx context.Context, src StatsSource, minVersion int64, fresh bool, render func(stats.Stored) ([]byte, error)) ([]byte, error) {
	s := stats.Stored{}
	if src != nil {
		var err error
		if s, err = src.GetAtLeast(ctx, minVersion, fresh); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.body != nil && l.version == s.Version && l.second == s.ReadAt.Unix() {
		return l.body, nil
	}
	body, err := render(s)
	if err != nil {
		return nil, err
	}
	l.version, l.second, l.body = s.Version, s.ReadAt.Unix(), body
	return body, nil
}

func (h *Handler) dashboardLiveView(ctx context.Context) (templates.DashboardLive, error) {
	if h.deps.Stats == nil {
		return h.withConfigChecks(ctx, h.withFeed(templates.DashboardLive{NoTraffic: true})), nil
	}
	s, err := h.deps.Stats.Get(ctx)
	if err != nil {
		return templates.DashboardLive{}, err
	}
	return h.withConfigChecks(ctx, h.withFeed(dashboardView(s, h.feedStatus()))), nil
}

// dashboardView maps a stored snapshot and the change feed's status to
// the live region's view model.
func dashboardView(s stats.Stored, feed changefeed.Status) templates.DashboardLive {
	var v templates.DashboardLive
	if s.Version > 0 {
		v.AsOf = s.ComputedAt.UTC().Format("15:04:05 UTC")
		v.Stale = s.ReadAt.Sub(s.ComputedAt) > staleAfter
	}
	var t totals
	for _, f := range s.Flows {
		t.add(f)
		v.Flows = append(v.Flows, templates.FlowRow{
			Destination: f.Destination, Topic: f.Topic, Href: flowHref(f.Destination, f.Topic, ""),
			QueuedHref: flowStageHref(f.Destination, f.Topic, "queued"), InFlightHref: flowStageHref(f.Destination, f.Topic, "in_flight"),
			RetryingHref: flowStageHref(f.Destination, f.Topic, "retrying"),
			DeadHref:     flowHref(f.Destination, f.Topic, "dead"), DeliveredHref: flowHref(f.Destination, f.Topic, "delivered"),
			Queued: count(f.Queued, s.PendingCapped), InFlight: count(f.InFlight, s.PendingCapped),
			Retrying: count(f.Retrying, s.PendingCapped), Dead: count(f.Dead, s.DeadCapped),
			Delivered: count(f.Delivered, false), Fail: failRate(f.Delivered, f.Retried, f.DeadLastHour),
		})
	}
	v.Capped = s.PendingCapped || s.DeadCapped
	v.NoTraffic = len(s.Flows) == 0 && len(s.Inbox) == 0
	v.Tiles = tiles(s, t)
	v.Status = dashboardStatus(s, v.Stale, feed)
	v.Breakers = breakerRows(s)
	v.Dispatchers = dispatcherRows(s)
	v.Inbox = inboxRows(s)
	series, _ := json.Marshal(s.Series) // plain ints: cannot fail
	v.SeriesJSON = string(series)
	return v
}

type totals struct{ queued, inFlight, retrying, dead, delivered, retried, dead1h int64 }

func (t *totals) add(f stats.Flow) {
	t.queued += f.Queued
	t.inFlight += f.InFlight
	t.retrying += f.Retrying
	t.dead += f.Dead
	t.delivered += f.Delivered
	t.retried += f.Retried
	t.dead1h += f.DeadLastHour
}

func tiles(s stats.Stored, t totals) []templates.Tile {
	lag, lagTone := "–", ""
	if s.OldestPendingAt != nil {
		d := max(s.ReadAt.Sub(*s.OldestPendingAt), 0)
		lag = age(d)
		if d > lagDegraded {
			lagTone = "warn"
		}
	}
	// The pending figures link to the messages in their stage, which the
	// list filters with the definitions the figures count with
	// (StatsPendingFlowList); the lag to every pending message.
	stage := func(name string) string { return messagesHref(url.Values{"stage": {name}}) }
	pending := messagesHref(url.Values{"state": {"pending"}})
	// Labels are one short word or two: at 390 px three tiles share a row
	// and a label on two lines pushes its figure below its neighbours'
	// (TestDashboardCountsLiveAndConverges); the note says the rest, its
	// figure kept on the line of what it is (a no-break space).
	return []templates.Tile{
		{TestID: "stat-pending", Label: "Pending", Value: count(t.queued, s.PendingCapped), Note: "not attempted yet", Href: stage("queued")},
		{TestID: "stat-in-flight", Label: "In flight", Value: count(t.inFlight, s.PendingCapped), Note: "leased by a dispatcher", Href: stage("in_flight")},
		{TestID: "stat-retrying", Label: "Retrying", Value: count(t.retrying, s.PendingCapped), Note: "after a failure", Tone: tone(t.retrying > 0, "warn"), Href: stage("retrying")},
		{TestID: "stat-dead", Label: "Dead", Value: count(s.DeadTotal, false), Note: countOf(s.DeadGroups, "error group"), Tone: tone(s.DeadTotal > 0, "bad"), Href: "/dead-letters"},
		{TestID: "stat-delivered", Label: "Delivered", Value: count(t.delivered, false), Note: "last hour, failure rate\u00a0" + failRate(t.delivered, t.retried, t.dead1h), Href: messagesHref(url.Values{"state": {"delivered"}})},
		{TestID: "stat-lag", Label: "Lag", Value: lag, Note: "age of the oldest pending", Tone: lagTone, Href: pending},
		{TestID: "stat-blocked", Label: "Blocked", Value: count(s.Blocked, false), Note: "aggregates held by a dead head", Tone: tone(s.Blocked > 0, "bad"), Href: "/aggregates/blocked"},
	}
}

func breakerRows(s stats.Stored) []templates.BreakerRow {
	rows := make([]templates.BreakerRow, 0, len(s.Breakers))
	for _, b := range s.Breakers {
		r := templates.BreakerRow{Destination: b.Destination, State: b.State, Owner: b.Owner, Tone: "ok",
			Href: messagesHref(url.Values{"destination": {b.Destination}, "state": {"pending"}})}
		if r.State == "" {
			r.State, r.Since = "closed", "never tripped"
		} else if b.ChangedAt != nil {
			r.Since = age(s.ReadAt.Sub(*b.ChangedAt)) + " ago"
		}
		switch r.State {
		case "open":
			r.Tone = "bad"
		case "half-open":
			r.Tone = "warn"
		}
		rows = append(rows, r)
	}
	return rows
}

// dispatcherRows are the dispatchers, each with its leases linked to the
// messages it holds in flight (leased_by): a late dispatcher's row leads
// to what its silence holds up until its leases expire.
func dispatcherRows(s stats.Stored) []templates.DispatcherRow {
	rows := make([]templates.DispatcherRow, 0, len(s.Dispatchers))
	for _, d := range s.Dispatchers {
		beat := s.ReadAt.Sub(d.HeartbeatAt)
		r := templates.DispatcherRow{
			Owner: d.Owner, Host: d.Host, Workers: strconv.Itoa(int(d.Workers)), Leases: strconv.Itoa(int(d.LeasesHeld)),
			HeartbeatAge: age(beat) + " ago", Status: "running", Tone: "ok", Href: messagesHref(url.Values{"leased_by": {d.Owner}}),
		}
		switch {
		case d.StoppedAt != nil:
			r.Status, r.Tone = "stopped", ""
		case beat > lateHeartbeat:
			r.Status, r.Tone = "late", "bad"
		}
		rows = append(rows, r)
	}
	return rows
}

// flowStageHref is the message list of one destination and topic's
// pending messages in stage (queued, in_flight, retrying).
func flowStageHref(destination, topic, stage string) string {
	return messagesHref(url.Values{"destination": {destination}, "topic": {topic}, "stage": {stage}})
}

func inboxRows(s stats.Stored) []templates.InboxSourceRow {
	rows := make([]templates.InboxSourceRow, 0, len(s.Inbox))
	for _, in := range s.Inbox {
		rows = append(rows, templates.InboxSourceRow{
			Source: in.Source, Href: "/inbox?source=" + url.QueryEscape(in.Source),
			Received: count(in.Received, s.InboxCapped), Duplicates: count(in.Duplicates, false),
			Failed: count(in.Failed, false), Parked: count(in.Parked, false),
			Stale: count(in.Stale, false), Held: count(in.Held, false),
			Hrefs: map[string]string{},
		})
		for _, st := range inboxStatuses {
			rows[len(rows)-1].Hrefs[st] = inboxHref(in.Source, st, 0)
		}
	}
	return rows
}

func tone(cond bool, t string) string {
	if cond {
		return t
	}
	return ""
}

// count formats n with thousands separators; capped marks a lower bound.
func count(n int64, capped bool) string {
	s := strconv.FormatInt(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if capped && n > 0 {
		return "≥ " + string(out)
	}
	return string(out)
}

func failRate(delivered, retried, dead int64) string {
	attempts := delivered + retried + dead
	if attempts == 0 {
		return "–"
	}
	return strconv.FormatFloat(100*float64(retried+dead)/float64(attempts), 'f', 1, 64) + " %"
}

// age formats a duration for people: "4 s", "3 min", "2 h 5 min".
func age(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h " + strconv.Itoa(int(d%time.Hour/time.Minute)) + " min"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + " d"
}

// countOf is n and noun, plural unless n is 1.
func countOf(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}
