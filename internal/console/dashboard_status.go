package console

import (
	"net/url"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/stats"
	"github.com/switchyard/switchyard/web/templates"
)

// The dashboard's status thresholds. Lag is the age of the oldest pending
// message; a dispatcher is late when its heartbeat (every few seconds) is
// older than lateHeartbeat.
const (
	lagDegraded   = time.Minute
	lagFailing    = 10 * time.Minute
	lateHeartbeat = 30 * time.Second
	// deadWindow: dead letters that arrived within it mean the dead
	// letters are growing now, not only that some exist.
	deadWindow = 5 * time.Minute
)

// Status levels, worst last.
const (
	levelHealthy = iota
	levelDegraded
	levelFailing
)

// statusBuilder collects the reasons of a status, each with its level.
type statusBuilder struct {
	level   int
	reasons []templates.StatusReason
}

func (b *statusBuilder) add(level int, text, href string) {
	b.level = max(b.level, level)
	tone := "warn"
	if level == levelFailing {
		tone = "bad"
	}
	b.reasons = append(b.reasons, templates.StatusReason{Text: text, Href: href, Tone: tone})
}

// dashboardStatus says in one line whether things are healthy, degraded
// or failing, and why, from the stored snapshot alone: failing when a
// breaker is open, a running dispatcher misses its heartbeat, no
// dispatcher runs while messages wait, or the lag passes lagFailing;
// degraded when dead letters grew within deadWindow, the lag passes
// lagDegraded, a breaker is half-open, aggregates are blocked, an inbound
// source holds events back or has failures, the statistics stopped
// updating, or this console's live feed is held back (feed: its
// Listener's status). Failing reasons come first; each links to the list
// behind it.
func dashboardStatus(s stats.Stored, stale bool, feed changefeed.Status) templates.DashboardStatus {
	var b statusBuilder
	statusBreakers(&b, s)
	statusDispatchers(&b, s)
	statusMessages(&b, s)
	statusInbox(&b, s)
	statusFeed(&b, feed)
	if stale {
		b.add(levelDegraded, "statistics not updating since "+s.ComputedAt.UTC().Format("15:04:05")+" UTC", "/healthz")
	}
	st := templates.DashboardStatus{Reasons: b.reasons}
	switch b.level {
	case levelHealthy:
		st.Level, st.Tone = "Healthy", "ok"
	case levelDegraded:
		st.Level, st.Tone = "Degraded", "warn"
	default:
		st.Level, st.Tone = "Failing", "bad"
		// Failing reasons first: they are what to look at.
		var first, rest []templates.StatusReason
		for _, r := range b.reasons {
			if r.Tone == "bad" {
				first = append(first, r)
			} else {
				rest = append(rest, r)
			}
		}
		st.Reasons = append(first, rest...)
	}
	return st
}

func statusBreakers(b *statusBuilder, s stats.Stored) {
	for _, br := range s.Breakers {
		href := messagesHref(url.Values{"destination": {br.Destination}, "state": {"pending"}})
		switch br.State {
		case "open":
			b.add(levelFailing, "breaker open for "+br.Destination, href)
		case "half-open":
			b.add(levelDegraded, "breaker half-open for "+br.Destination, href)
		}
	}
}

func statusDispatchers(b *statusBuilder, s stats.Stored) {
	running := 0
	for _, d := range s.Dispatchers {
		if d.StoppedAt != nil {
			continue
		}
		if beat := s.ReadAt.Sub(d.HeartbeatAt); beat > lateHeartbeat {
			b.add(levelFailing, "dispatcher "+d.Owner+" without heartbeat for "+age(beat), "#dispatchers")
			continue
		}
		running++
	}
	var pending int64
	for _, f := range s.Flows {
		pending += f.Queued + f.InFlight + f.Retrying
	}
	if running == 0 && pending > 0 {
		b.add(levelFailing, "no dispatcher running, "+count(pending, s.PendingCapped)+" messages waiting", "#dispatchers")
	}
}

func statusMessages(b *statusBuilder, s stats.Stored) {
	if s.OldestPendingAt != nil {
		lag := max(s.ReadAt.Sub(*s.OldestPendingAt), 0)
		switch {
		case lag > lagFailing:
			b.add(levelFailing, "lag "+age(lag)+" (above "+age(lagFailing)+")", messagesHref(url.Values{"state": {"pending"}}))
		case lag > lagDegraded:
			b.add(levelDegraded, "lag "+age(lag)+" (above "+age(lagDegraded)+")", messagesHref(url.Values{"state": {"pending"}}))
		}
	}
	if n := recentDead(s.Series, int(deadWindow/time.Second)); n > 0 {
		b.add(levelDegraded, count(n, false)+" new dead letters in the last "+age(deadWindow), "/dead-letters")
	}
	if s.Blocked > 0 {
		b.add(levelDegraded, count(s.Blocked, false)+" blocked aggregates", "/aggregates/blocked")
	}
}

func statusInbox(b *statusBuilder, s stats.Stored) {
	for _, in := range s.Inbox {
		if in.Held > 0 {
			b.add(levelDegraded, "inbox "+in.Source+" holds "+count(in.Held, false)+" events back", inboxHref(in.Source, "held", 0))
		}
		if n := in.Failed + in.Parked; n > 0 {
			status := "failed"
			if in.Failed == 0 {
				status = "parked"
			}
			b.add(levelDegraded, "inbox "+in.Source+": "+count(n, false)+" failed or parked events", inboxHref(in.Source, status, 0))
		}
	}
}

// statusFeed: a held-back feed, or one whose reads fail, delays what
// every live page of this console shows (the numbers here included), not
// the messages: degraded. A long transaction alone delays only its own
// changes, and is no reason. The reason links to the feed's note at the
// top of the dashboard, which names the oldest open transaction.
func statusFeed(b *statusBuilder, feed changefeed.Status) {
	switch {
	case feed.Err != "":
		b.add(levelDegraded, "live feed not updating: its reads fail", "#live-feed")
	case feed.HeldBack:
		b.add(levelDegraded, "live feed held back by "+strconv.Itoa(feed.Open)+" open transactions", "#live-feed")
	}
}

// recentDead sums the dead letters of the series' last n seconds.
func recentDead(s stats.Series, n int) int64 {
	var sum int64
	for i := max(len(s.Dead)-n, 0); i < len(s.Dead); i++ {
		sum += s.Dead[i]
	}
	return sum
}

// messagesHref is the message list filtered by q.
func messagesHref(q url.Values) string {
	if len(q) == 0 {
		return "/messages"
	}
	return "/messages?" + q.Encode()
}

// flowHref is the message list of one destination and topic in state
// ("" for every state).
func flowHref(destination, topic, state string) string {
	q := url.Values{"destination": {destination}, "topic": {topic}}
	if state != "" {
		q.Set("state", state)
	}
	return messagesHref(q)
}
