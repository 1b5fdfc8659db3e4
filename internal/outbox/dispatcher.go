package outbox

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/backoff"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/pglisten"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// Route is how the dispatcher reaches one destination.
type Route struct {
	Destination destination.Destination
	// Retry decides the delay before each retry and when to give up.
	Retry backoff.Policy
	// Timeout bounds one delivery attempt. Default 10 s.
	Timeout time.Duration
	// Guard, when set, is the destination's circuit breaker, bulkhead and
	// rate limit: while its breaker is open the destination's messages are
	// not claimed, and burn no attempts.
	Guard *guard.Guard
}

// Config configures a Dispatcher. Zero fields take the documented defaults.
type Config struct {
	// Owner names this dispatcher in leases and attempt records. Default:
	// host name, pid and a random suffix.
	Owner string
	// Workers is the number of claim-deliver-finalize loops. Default 4.
	Workers int
	// BatchSize is the most deliveries one worker runs at once, and so the
	// most one claim leases: messages without an aggregate, and aggregates,
	// each delivery running up to AggregateBatch messages. Default 100.
	BatchSize int
	// AggregateBatch is the most messages of one aggregate a claim leases
	// together; one goroutine delivers them in order and stops at the first
	// that does not succeed. It also bounds how many unordered messages of
	// one destination a delivery runs one after another, as many as its
	// recent pace lets finish in about 20 ms (one until it has one).
	// Default 32.
	AggregateBatch int
	// LeaseDuration is how long a claim holds a message before another
	// dispatcher may claim it again; a heartbeat extends it while the
	// delivery runs. Default 30 s.
	LeaseDuration time.Duration
	// IdlePoll is how long a worker whose claim was not full waits before
	// it claims again, unless woken earlier by Wake, a Notify from any
	// process, or a finalize that made messages due or room at a
	// destination the worker held its share of. Default 50 ms.
	IdlePoll time.Duration
	// WakeCooldown is the shortest time between two wake-ups from
	// notifications (Notify, from any process): the notifications received
	// meanwhile wake the workers once, when it ends. Default (zero or
	// less) 5 ms.
	WakeCooldown time.Duration
	// StopGrace is how long Stop lets deliveries in flight finish before
	// cancelling them. Default 10 s.
	StopGrace time.Duration
	// Routes maps destination names to how to reach them. Messages for a
	// destination without a route are not claimed. SetRoutes replaces them
	// while the dispatcher runs.
	Routes map[string]Route
	// HeartbeatInterval is how often the dispatcher refreshes its row in
	// switchyard.dispatchers. Default 5 s.
	HeartbeatInterval time.Duration
	// Retention is how long history is kept; the dispatcher prunes it.
	Retention Retention
	// Clock, when set, replaces the database's now() in claims: tests use
	// it to expire leases deterministically.
	Clock func() time.Time
	// Random draws backoff jitter in [0, 1). Default math/rand/v2.
	Random func() float64
	// Changed, when set, is called after a commit that appended to the
	// change feed (switchyard.changes): messages went dead. It must not
	// block; a coalescing notifier's Poke (internal/changefeed) fits.
	Changed func()
	// Notifications is the process's one LISTEN connection
	// (internal/pglisten): the dispatcher subscribes to WakeChannel on it.
	// The caller starts and stops it. Nil: the dispatcher runs one of its
	// own.
	Notifications *pglisten.Listener
	// Logger receives stale finalizes and errors. Default: discard.
	Logger  *slog.Logger
	Metrics *Metrics
}

func (c Config) withDefaults() Config {
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	c.Workers = defaultInt(c.Workers, 4)
	c.BatchSize = defaultInt(c.BatchSize, 100)
	c.AggregateBatch = defaultInt(c.AggregateBatch, 32)
	c.LeaseDuration = defaultDuration(c.LeaseDuration, 30*time.Second)
	c.IdlePoll = defaultDuration(c.IdlePoll, 50*time.Millisecond)
	c.WakeCooldown = defaultDuration(c.WakeCooldown, 5*time.Millisecond)
	c.StopGrace = defaultDuration(c.StopGrace, 10*time.Second)
	c.HeartbeatInterval = defaultDuration(c.HeartbeatInterval, 5*time.Second)
	c.Retention = c.Retention.withDefaults()
	if c.Random == nil {
		c.Random = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Changed == nil {
		c.Changed = func() {}
	}
	return c
}

// Dispatcher runs Workers loops that claim due messages, deliver them
// outside any transaction, and finalize each batch in one statement.
// Any number of dispatchers may run against one database.
type Dispatcher struct {
	cfg        Config
	pool       *pgxpool.Pool
	routes     atomic.Pointer[routeTable]
	wake       chan struct{}
	inFlight   atomic.Int64 // messages claimed and not yet finalized
	isStopping atomic.Bool  // set when Stop begins
	stats      claimStatistics
	// statisticsDue asks the heartbeat loop to read the claims'
	// statistics now (noteClaimed).
	statisticsDue chan struct{}
	marks         unorderedMarks // where the next unordered claim starts
	life          service.Lifecycle

	mu      sync.Mutex
	hardCtx context.Context    // guarded by mu: deliveries run under it
	hardEnd context.CancelFunc // guarded by mu
}

// New returns a Dispatcher; Start runs it.
func New(pool *pgxpool.Pool, cfg Config) *Dispatcher {
	cfg = cfg.withDefaults()
	d := &Dispatcher{cfg: cfg, pool: pool, wake: make(chan struct{}, 1), statisticsDue: make(chan struct{}, 1)}
	d.SetRoutes(cfg.Routes)
	return d
}

// Start launches the workers. It returns an error if already started.
func (d *Dispatcher) Start(ctx context.Context) error {
	setup := func(ctx context.Context) error {
		// Registered before the first lease, so that the console never
		// sees leases held by a dispatcher it does not know.
		d.heartbeat(ctx)
		d.mu.Lock()
		d.hardCtx, d.hardEnd = context.WithCancel(context.WithoutCancel(ctx))
		d.mu.Unlock()
		return nil
	}
	return d.life.Start(ctx, setup, d.run)
}

// run runs the workers until ctx ends, then gives deliveries in flight
// StopGrace to finish before cancelling them.
func (d *Dispatcher) run(ctx context.Context) {
	d.mu.Lock()
	hardEnd := d.hardEnd
	d.mu.Unlock()
	var wg sync.WaitGroup
	for i := range d.cfg.Workers {
		wg.Go(func() { d.work(ctx, fmt.Sprintf("%s/%d", d.cfg.Owner, i)) })
	}
	wg.Go(func() { d.retentionLoop(ctx) })
	wg.Go(func() { d.listen(ctx) })
	wg.Go(func() { d.heartbeatLoop(ctx) })
	// Once stopping, deliveries in flight get StopGrace, then are
	// cancelled.
	context.AfterFunc(ctx, func() {
		t := time.AfterFunc(d.cfg.StopGrace, hardEnd)
		wg.Wait()
		t.Stop()
	})
	wg.Wait()
	d.markStopped()
	hardEnd()
}

// Stop stops claiming, lets deliveries in flight finish for up to StopGrace
// (then cancels them), finalizes what finished and releases what never
// started. It is idempotent.
func (d *Dispatcher) Stop() {
	if d.life.Started() {
		d.isStopping.Store(true)
	}
	d.life.Stop()
}

// stopping reports whether Stop has begun.
func (d *Dispatcher) stopping() bool { return d.isStopping.Load() }

// Wake makes an idle worker claim now instead of at its next poll: call it
// after committing a transaction that enqueued. Wake-ups coalesce: one
// worker claims, and wakes another only if its claim came back full, so a
// burst of notifications costs a claim or two, not one per worker each.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// routeTable is the routes in use; it is replaced whole, never changed.
type routeTable struct {
	routes map[string]Route
	names  []string
}

// SetRoutes replaces the routes: claims and deliveries that start from now
// on use the new ones. A destination whose route is removed is no longer
// claimed. Safe to call while the dispatcher runs.
func (d *Dispatcher) SetRoutes(routes map[string]Route) {
	t := &routeTable{routes: make(map[string]Route, len(routes))}
	for name, r := range routes {
		t.routes[name] = r
		t.names = append(t.names, name)
	}
	slices.Sort(t.names)
	d.routes.Store(t)
}

// route returns the current route to destination.
func (d *Dispatcher) route(destination string) (Route, bool) {
	r, ok := d.routes.Load().routes[destination]
	return r, ok
}

func (d *Dispatcher) now() *time.Time {
	if d.cfg.Clock == nil {
		return nil
	}
	t := d.cfg.Clock()
	return &t
}

// claim leases up to limit deliveries: messages without an aggregate (at
// least half of limit when that many are due) and aggregates for the rest,
// each destination within its share (see claimable). Each unordered
// message is a delivery of its own; a worker's claims group them by pace
// (claimPaced).
func (d *Dispatcher) claim(ctx context.Context, worker string, limit int, held map[string]int) ([]group, error) {
	groups, _, err := d.claimPaced(ctx, claimRequest{worker: worker, limit: limit, held: held})
	return groups, err
}

// claimRequest is what a worker asks of a claim (claimPaced).
type claimRequest struct {
	worker string
	limit  int            // most deliveries to lease
	held   map[string]int // the worker's deliveries in flight per destination
	// sizes is how many unordered messages one delivery may run at each
	// destination (worker.groupSizes); 1 where not given.
	sizes map[string]int
	// orderedFirst sends the ordered claim before the unordered one: the
	// worker's last claim found ordered messages only, and was not full.
	orderedFirst bool
	// leased, if not nil, is given each statement's deliveries as soon as
	// it returns, to be started while the next statement runs.
	leased func([]group)
}

// claimPaced is claim for a worker that knows how many unordered messages
// one delivery may run at each destination (r.sizes, from its pace):
// unordered messages of a destination that keeps up are leased several to
// a delivery, as an aggregate's are, so that one claim and one finalize
// serve many messages instead of a few. capped says that a destination's
// share (see claimable) left it out of the claim or stopped the claim
// there: it may have more due, to be claimed once deliveries there land.
//
// A claim is up to three statements: the kind sent first (unordered
// messages, or aggregates if r.orderedFirst) for half of r.limit, the
// other kind for what is left, and the first kind again for the rest if
// it found its half. Each kind gets at least half of a full claim, and
// what one leaves unused goes to the other, so neither starves the other
// and a claim is full when only one kind is waiting. What a statement
// leased is passed to r.leased before the next is sent: a delivery never
// waits for a statement that finds nothing for it (each one a commit; a
// whole claim took 1.3 ms at the p50 and 12 at the p99 under 1,000
// messages a second; BENCHMARKS.md, "Planned claims on a new outbox" and
// "A claim's deliveries start as each statement returns").
func (d *Dispatcher) claimPaced(ctx context.Context, r claimRequest) (claimed []group, capped bool, err error) {
	destinations, caps, atShare := d.claimable(r.limit, r.held)
	if len(destinations) == 0 || r.limit <= 0 {
		return nil, atShare, nil
	}
	start := time.Now()
	c := &claimStep{d: d, ctx: ctx, r: r, destinations: destinations, caps: caps}
	first, second := c.unordered, c.ordered
	if r.orderedFirst {
		first, second = c.ordered, c.unordered
	}
	// On an error, what the statements before it leased is still returned,
	// to be delivered rather than left waiting for its lease to expire.
	half := max(r.limit/2, 1)
	firstGot, err := first(half)
	if rest := r.limit - len(c.claimed); err == nil && rest > 0 {
		_, err = second(rest)
	}
	if rest := r.limit - len(c.claimed); err == nil && rest > 0 && firstGot == half {
		_, err = first(rest)
	}
	if err != nil {
		return c.claimed, false, err
	}
	d.cfg.Metrics.claimSeconds.Observe(time.Since(start).Seconds())
	d.noteClaimed(messagesIn(c.claimed))
	return c.claimed, atShare || slices.Contains(c.caps, 0), nil
}

// claimStep is a claim in progress (claimPaced): the destinations it may
// lease from, with how many deliveries each may still take, and what its
// statements have leased so far.
type claimStep struct {
	d            *Dispatcher
	ctx          context.Context
	r            claimRequest
	destinations []string
	caps         []int32
	claimed      []group
}

// took takes what a statement leased off the destinations' caps, and
// passes it on to the request's leased.
func (c *claimStep) took(groups []group) {
	for _, g := range groups {
		if i := slices.Index(c.destinations, g.msgs[0].Destination); i >= 0 {
			c.caps[i]--
		}
	}
	c.claimed = append(c.claimed, groups...)
	if c.r.leased != nil && len(groups) > 0 {
		c.r.leased(groups)
	}
}

// unordered leases up to n deliveries of unordered messages, and says how
// many it leased.
func (c *claimStep) unordered(n int) (int, error) {
	share := unorderedShareOf(c.destinations, c.caps, n, c.r.sizes)
	if len(share.names) == 0 {
		return 0, nil
	}
	from := c.d.marks.start(share.names, time.Now())
	batch := n * share.largest
	rows, err := c.d.claimQueries(false).OutboxClaimUnordered(c.ctx, queries.OutboxClaimUnorderedParams{
		Owner: c.r.worker, LeaseSeconds: c.d.cfg.LeaseDuration.Seconds(), Destinations: share.names,
		AfterAt: from.at, AfterID: from.id, Caps: share.messages, BatchSize: int32(batch), Now: c.d.now(),
	})
	if err != nil {
		return 0, fmt.Errorf("claim unordered: %w", err)
	}
	c.d.marks.claimed(share.names, share.messages, batch, from, rows, time.Now())
	groups, excess := share.group(rows, n)
	// The deliveries first: the release is a round trip of its own.
	c.took(groups)
	c.d.release(c.ctx, c.r.worker, excess)
	return len(groups), nil
}

// ordered leases up to n aggregates, each a delivery of its messages in
// order, and says how many it leased.
func (c *claimStep) ordered(n int) (int, error) {
	// No destination with room left (the other kind took it all): the
	// ordered claim could lease nothing, and is not sent.
	if !slices.ContainsFunc(c.caps, func(left int32) bool { return left > 0 }) {
		return 0, nil
	}
	rows, err := c.d.claimQueries(true).OutboxClaimOrdered(c.ctx, queries.OutboxClaimOrderedParams{
		Owner: c.r.worker, LeaseSeconds: c.d.cfg.LeaseDuration.Seconds(), Destinations: c.destinations, Caps: c.caps,
		Aggregates: int32(n), PerAggregate: int32(c.d.cfg.AggregateBatch), Now: c.d.now(),
	})
	if err != nil {
		return 0, fmt.Errorf("claim ordered: %w", err)
	}
	groups := groupByAggregate(rows)
	c.took(groups)
	return len(groups), nil
}

// release gives back at once what a claim leased but cannot deliver now:
// pending again, due at once, attempts given back, no attempt recorded.
// If it fails, the leases run out instead.
func (d *Dispatcher) release(ctx context.Context, worker string, msgs []claimedMessage) {
	if len(msgs) == 0 {
		return
	}
	now := time.Now()
	results := make([]result, len(msgs))
	for i, m := range msgs {
		results[i] = result{msg: m, outcome: outcomeReleased, started: now, finished: now}
	}
	if _, _, err := d.finalize(ctx, worker, results); err != nil {
		d.cfg.Logger.Error("release of an unordered claim's excess failed", slog.String("worker", worker), slog.Any("error", err))
		return
	}
	// Due at once again: a worker with room claims them.
	d.Wake()
}

// claimable lists the destinations whose messages a worker may claim now,
// in a new random order each time (the claim serves them in that order),
// each with how many deliveries it may add to the worker's window: none
// while its breaker is open; else twice what the destination can run at
// once (its bulkhead, and with a rate limit what it may start within about
// a second), at most half the window, minus what the worker already holds
// of it. A destination that cannot keep up (slow, hanging, rate-limited)
// thus never fills more than half a window with messages that only wait,
// and other destinations always find room. held counts the worker's
// deliveries in flight per destination. atShare says that a destination
// was left out because the worker holds too much of its share (not for an
// open breaker): deliveries landing there make room for more.
func (d *Dispatcher) claimable(limit int, held map[string]int) (names []string, caps []int32, atShare bool) {
	table := d.routes.Load()
	for _, name := range table.names {
		share := d.share(table.routes[name])
		// Like the window itself, a destination is claimed for only once
		// half its share is free, so that claims stay large.
		if free := share - held[name]; free >= max(share/2, 1) {
			names, caps = append(names, name), append(caps, int32(min(free, limit)))
		} else if share > 0 {
			atShare = true
		}
	}
	rand.Shuffle(len(names), func(i, j int) {
		names[i], names[j] = names[j], names[i]
		caps[i], caps[j] = caps[j], caps[i]
	})
	return names, caps, atShare
}

// share is the most deliveries of route's destination one worker may hold.
func (d *Dispatcher) share(route Route) int {
	g := route.Guard
	if g == nil {
		return d.cfg.BatchSize
	}
	if !g.Claimable() {
		return 0
	}
	cfg := g.Config()
	most := cfg.Concurrency
	if cfg.Rate > 0 {
		most = min(most, int(math.Ceil(cfg.Rate))+cfg.Burst)
	}
	return max(min(2*most, d.cfg.BatchSize/2), 1)
}

// claimedMessage is a leased message as a claim returns it. An ordered one
// (AggregateID not empty) is held under its aggregate's lease.
type claimedMessage struct {
	queries.OutboxClaimUnorderedRow
	AggregateSeq          int64
	AggregateLeaseVersion int64
	// Counted is true when the claim counted this delivery's attempt
	// (Attempts includes it; a release gives it back). An ordered message
	// behind its aggregate's first is counted at finalize, if tried:
	// Attempts then already says which attempt it would be.
	Counted bool
}

// attemptDelta is what a finalize adds to a message's attempt count.
func (m claimedMessage) attemptDelta(outcome string) int32 {
	switch {
	case m.Counted && outcome == outcomeReleased:
		return -1
	case !m.Counted && outcome != outcomeReleased:
		return 1
	}
	return 0
}

// DefaultOwner names a dispatcher by host name, pid and a random suffix,
// unique among dispatchers running at once.
func DefaultOwner() string { return defaultOwner() }

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "dispatcher"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), crand.Text()[:6])
}

func defaultInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func defaultDuration(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}
