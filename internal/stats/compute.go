package stats

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// recent is how many seconds of delivery_stats the leader re-reads each
// tick: a finalize writes the second its transaction started in, so rows
// of the last few seconds can still grow after the leader read them.
const recent = 10

// deadEvery is the fewest ticks between two recounts of dead messages per
// destination and topic.
const deadEvery = 30

type flowKey struct{ destination, topic string }

type outcomes struct{ delivered, retried, dead int64 }

// computer holds what the leader keeps between ticks: the last hour of
// delivery_stats per second, the dead counts (recounted only when
// dead_letter_groups changes) and the inbox received counts (recounted
// when new events arrived, at most every ReceivedEvery ticks).
type computer struct {
	q   *queries.Queries
	cfg Config

	seconds map[int64]map[flowKey]outcomes // unix second -> flow -> outcomes
	loaded  bool

	deadTick   int // the tick of the last recount
	deadSig    queries.StatsDeadSignatureGetRow
	deadKnown  bool
	dead       map[flowKey]int64
	deadCapped bool

	ticks          int
	received       map[string]int64
	receivedCapped bool
	receivedHead   int64 // the newest event id when received was counted
	receivedTick   int   // the tick it was counted at
}

func newComputer(q *queries.Queries, cfg Config) *computer {
	return &computer{q: q, cfg: cfg, seconds: map[int64]map[flowKey]outcomes{}}
}

// compute builds one snapshot.
func (c *computer) compute(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	now, err := c.q.StatsClockGet(ctx)
	if err != nil {
		return s, fmt.Errorf("stats: read clock: %w", err)
	}
	flows := map[flowKey]*Flow{}
	flow := func(k flowKey) *Flow {
		f, ok := flows[k]
		if !ok {
			f = &Flow{Destination: k.destination, Topic: k.topic}
			flows[k] = f
		}
		return f
	}
	head, err := c.q.StatsOutboxHeadGet(ctx)
	if err != nil {
		return s, fmt.Errorf("stats: read the newest outbox id: %w", err)
	}
	s.NewestOutboxID, s.NewestDeliveryUS = head.NewestID, head.NewestDeliveryUs
	if err := c.pending(ctx, &s, flow); err != nil {
		return s, err
	}
	if err := c.deadFlows(ctx, &s, flow); err != nil {
		return s, err
	}
	if err := c.deliveries(ctx, now, &s, flow); err != nil {
		return s, err
	}
	for _, f := range flows {
		s.Flows = append(s.Flows, *f)
	}
	slices.SortFunc(s.Flows, func(a, b Flow) int {
		return cmp.Or(cmp.Compare(a.Destination, b.Destination), cmp.Compare(a.Topic, b.Topic))
	})
	if err := c.health(ctx, &s); err != nil {
		return s, err
	}
	if err := c.inbox(ctx, &s); err != nil {
		return s, err
	}
	c.ticks++
	return s, nil
}

func (c *computer) pending(ctx context.Context, s *Snapshot, flow func(flowKey) *Flow) error {
	rows, err := c.q.StatsPendingFlowList(ctx, c.cfg.MaxRows)
	if err != nil {
		return fmt.Errorf("stats: count pending: %w", err)
	}
	var total int64
	for _, r := range rows {
		f := flow(flowKey{r.Destination, r.Topic})
		f.Queued, f.InFlight, f.Retrying = r.Queued, r.InFlight, r.Retrying
		total += r.Queued + r.InFlight + r.Retrying
		if s.OldestPendingAt == nil || r.OldestCreatedAt.Before(*s.OldestPendingAt) {
			t := r.OldestCreatedAt.UTC()
			s.OldestPendingAt = &t
		}
	}
	s.PendingCapped = total >= int64(c.cfg.MaxRows)
	return nil
}

func (c *computer) deadFlows(ctx context.Context, s *Snapshot, flow func(flowKey) *Flow) error {
	sig, err := c.q.StatsDeadSignatureGet(ctx)
	if err != nil {
		return fmt.Errorf("stats: read dead-letter groups: %w", err)
	}
	s.DeadTotal, s.DeadGroups = sig.Dead, sig.Groups
	// The recount reads a heap page per dead message (EXPLAIN.md: about
	// 0.7 s cold for 100,000), so it runs at most every deadEvery ticks;
	// the headline total above is exact on every tick.
	if !c.deadKnown || (sig != c.deadSig && c.ticks-c.deadTick >= deadEvery) {
		c.deadTick = c.ticks
		rows, err := c.q.StatsDeadFlowList(ctx, c.cfg.MaxRows)
		if err != nil {
			return fmt.Errorf("stats: count dead: %w", err)
		}
		c.dead = map[flowKey]int64{}
		var total int64
		for _, r := range rows {
			c.dead[flowKey{r.Destination, r.Topic}] = r.Dead
			total += r.Dead
		}
		c.deadSig, c.deadKnown, c.deadCapped = sig, true, total >= int64(c.cfg.MaxRows)
	}
	for k, n := range c.dead {
		flow(k).Dead = n
	}
	s.DeadCapped = c.deadCapped
	return nil
}

// deliveries refreshes the in-memory hour of delivery_stats and derives
// the last hour's totals per flow and the per-second series.
func (c *computer) deliveries(ctx context.Context, now time.Time, s *Snapshot, flow func(flowKey) *Flow) error {
	nowSec := now.Unix()
	since := nowSec - recent
	if !c.loaded {
		since = nowSec - 3600
	}
	rows, err := c.q.StatsDeliverySecondList(ctx, time.Unix(since, 0))
	if err != nil {
		return fmt.Errorf("stats: read delivery stats: %w", err)
	}
	for sec := range c.seconds {
		if sec >= since || sec <= nowSec-3600 {
			delete(c.seconds, sec)
		}
	}
	for _, r := range rows {
		sec := r.Second.Unix()
		m := c.seconds[sec]
		if m == nil {
			m = map[flowKey]outcomes{}
			c.seconds[sec] = m
		}
		m[flowKey{r.Destination, r.Topic}] = outcomes{r.Delivered, r.Retried, r.Dead}
	}
	c.loaded = true
	start := nowSec - SeriesSeconds + 1
	s.Series = Series{Start: start, Delivered: make([]int64, SeriesSeconds), Retried: make([]int64, SeriesSeconds), Dead: make([]int64, SeriesSeconds)}
	for sec, m := range c.seconds {
		for k, o := range m {
			if o == (outcomes{}) {
				continue
			}
			f := flow(k)
			f.Delivered += o.delivered
			f.Retried += o.retried
			f.DeadLastHour += o.dead
			if i := sec - start; i >= 0 && i < SeriesSeconds {
				s.Series.Delivered[i] += o.delivered
				s.Series.Retried[i] += o.retried
				s.Series.Dead[i] += o.dead
			}
		}
	}
	return nil
}
