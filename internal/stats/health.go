package stats

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// health reads breakers, dispatchers and blocked aggregates: small
// maintained tables.
func (c *computer) health(ctx context.Context, s *Snapshot) error {
	names, err := c.q.StatsDestinationList(ctx)
	if err != nil {
		return fmt.Errorf("stats: list destinations: %w", err)
	}
	breakers, err := c.q.StatsBreakerList(ctx)
	if err != nil {
		return fmt.Errorf("stats: read breakers: %w", err)
	}
	latest := map[string]Breaker{}
	for _, b := range breakers {
		at := b.ChangedAt.UTC()
		latest[b.Destination] = Breaker{Destination: b.Destination, State: b.ToState, Owner: b.Owner, ChangedAt: &at}
	}
	s.Breakers = make([]Breaker, 0, len(names))
	for _, n := range names {
		b, ok := latest[n]
		if !ok {
			b = Breaker{Destination: n}
		}
		s.Breakers = append(s.Breakers, b)
	}
	ds, err := c.q.StatsDispatcherList(ctx, 50)
	if err != nil {
		return fmt.Errorf("stats: list dispatchers: %w", err)
	}
	s.Dispatchers = make([]Dispatcher, 0, len(ds))
	for _, d := range ds {
		s.Dispatchers = append(s.Dispatchers, Dispatcher{
			Owner: d.Owner, Host: d.Host, PID: d.Pid, Workers: d.Workers, LeasesHeld: d.LeasesHeld,
			StartedAt: d.StartedAt.UTC(), HeartbeatAt: d.HeartbeatAt.UTC(), StoppedAt: utc(d.StoppedAt),
		})
	}
	if s.Blocked, err = c.q.StatsBlockedAggregateCount(ctx); err != nil {
		return fmt.Errorf("stats: count blocked aggregates: %w", err)
	}
	return nil
}

// inbox counts inbound events per source: those needing attention every
// tick, all received when new events arrived, at most every ReceivedEvery
// ticks.
func (c *computer) inbox(ctx context.Context, s *Snapshot) error {
	by := map[string]*Inbox{}
	get := func(src string) *Inbox {
		in, ok := by[src]
		if !ok {
			in = &Inbox{Source: src}
			by[src] = in
		}
		return in
	}
	head, err := c.q.StatsInboxHeadGet(ctx)
	if err != nil {
		return fmt.Errorf("stats: read the newest inbox event: %w", err)
	}
	if c.received == nil || (head != c.receivedHead && c.ticks-c.receivedTick >= c.cfg.ReceivedEvery) {
		c.receivedHead, c.receivedTick = head, c.ticks
		rows, err := c.q.StatsInboxReceivedList(ctx, c.cfg.MaxRows)
		if err != nil {
			return fmt.Errorf("stats: count inbox events: %w", err)
		}
		c.received = map[string]int64{}
		var total int64
		for _, r := range rows {
			c.received[r.Source] = r.Events
			total += r.Events
		}
		c.receivedCapped = total >= int64(c.cfg.MaxRows)
	}
	for src, n := range c.received {
		get(src).Received = n
	}
	attention, err := c.q.StatsInboxAttentionList(ctx, c.cfg.MaxRows)
	if err != nil {
		return fmt.Errorf("stats: count inbox failures: %w", err)
	}
	for _, r := range attention {
		in := get(r.Source)
		switch r.Status {
		case "failed":
			in.Failed = r.Events
		case "parked":
			in.Parked = r.Events
		case "stale":
			in.Stale = r.Events
		case "held":
			in.Held = r.Events
		}
	}
	dups, err := c.q.StatsInboxDuplicateList(ctx)
	if err != nil {
		return fmt.Errorf("stats: read inbox duplicates: %w", err)
	}
	for _, d := range dups {
		get(d.Source).Duplicates = d.Duplicates
	}
	s.InboxCapped = c.receivedCapped
	for _, in := range by {
		s.Inbox = append(s.Inbox, *in)
	}
	slices.SortFunc(s.Inbox, func(a, b Inbox) int { return cmp.Compare(a.Source, b.Source) })
	return nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
