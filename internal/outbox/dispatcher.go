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
	"github.com/switchyard/switchyard/internal/pgwarm"
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
	// most one claim leases: messages without an aggregate, and aggregates
	// (at most 128 of one destination per claim statement), each delivery
	// running up to AggregateBatch messages. Default 100.
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
	c.WakeCooldown = defaultDuration(c.WakeCooldown, defaultWakeCooldown)
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
	stretches     stretchCounts  // each stretch's messages not yet finalized
	splits        kindSplits     // each destination's split between the kinds
	life          service.Lifecycle

	// The dispatcher's claims of one kind take turns, each kind holding its
	// turn (a channel of one slot) while its statement runs: unordered
	// messages (claimStep.leaseUnordered, with the marks) and aggregates
	// (claimStep.leaseAggregates). Claims sent side by side read the same
	// rows first (the same mark, the same due aggregates) and each steps
	// over the rows the other has locked (SKIP LOCKED) to lease those past
	// them: the server's CPU spent on nothing. One after another, each
	// starts where the last one ended. In drains of 100,000 messages that
	// cut the claims' time on the server by more than half (BENCHMARKS.md,
	// "Claims that take turns"). A turn is held around that one statement
	// only, never across a delivery's start or a release, and never two
	// at once; the two kinds lease different rows and do not wait for
	// each other. Claims of different destinations take turns too: they
	// are one statement for all of a worker's destinations.
	unorderedTurn chan struct{}
	orderedTurn   chan struct{}

	claimsMu sync.Mutex
	claims   *pgxpool.Pool // guarded by claimsMu: the prepared claims' (claimPool)

	mu      sync.Mutex
	hardCtx context.Context    // guarded by mu: deliveries run under it
	hardEnd context.CancelFunc // guarded by mu
	// stopListening ends the wake-ups (startListening); guarded by mu.
	stopListening func()
}

// New returns a Dispatcher; Start runs it.
func New(pool *pgxpool.Pool, cfg Config) *Dispatcher {
	cfg = cfg.withDefaults()
	d := &Dispatcher{cfg: cfg, pool: pool, wake: make(chan struct{}, 1), statisticsDue: make(chan struct{}, 1),
		unorderedTurn: make(chan struct{}, 1), orderedTurn: make(chan struct{}, 1)}
	d.SetRoutes(cfg.Routes)
	return d
}

// Start launches the workers, once it has registered the dispatcher,
// opened the workers' connections (openConnections: up to
// openConnectionsWait when the pool has no room) and put its LISTEN in
// place (startListening: up to listenWait). It returns an error if
// already started.
func (d *Dispatcher) Start(ctx context.Context) error {
	setup := func(ctx context.Context) error {
		// Registered before the first lease, so that the console never
		// sees leases held by a dispatcher it does not know.
		d.heartbeat(ctx)
		d.openConnections(ctx)
		stopListening := d.startListening(ctx)
		d.mu.Lock()
		d.hardCtx, d.hardEnd = context.WithCancel(context.WithoutCancel(ctx))
		d.stopListening = stopListening
		d.mu.Unlock()
		return nil
	}
	return d.life.Start(ctx, setup, d.run)
}

// openConnectionsWait bounds how long Start waits for openConnections: a
// pool shared with others may have no room.
const openConnectionsWait = 5 * time.Second

// openConnections makes sure the pool holds two connections for each
// worker and one more (a worker's claim and its finalize overlap, and the
// statistics' reads with both), and the claims' pool its connections
// (claimPool), open and idle before the first claim.
// Made as the first messages arrived, each connection delayed the claim or
// finalize that asked for it, and took CPU that the others needed. On a
// new dispatcher at 1,000 messages a second, the first second's p99 was
// 63–94 ms with no connection open beforehand, and 33–35 with the
// dispatcher's open (BENCHMARKS.md, "The dispatcher's connections opened
// at its start"). A failure is logged, and the workers open what they
// need as before.
func (d *Dispatcher) openConnections(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, openConnectionsWait)
	defer cancel()
	if err := pgwarm.Open(ctx, d.pool, 2*d.cfg.Workers+1); err != nil {
		d.cfg.Logger.Warn("outbox: opening the workers' connections failed; they open them as they need them", "error", err)
	}
	claims, err := d.claimPool()
	if err == nil {
		err = pgwarm.Open(ctx, claims, claimConnections)
	}
	if err != nil {
		d.cfg.Logger.Warn("outbox: opening the claims' connections failed; they open them as they need them", "error", err)
	}
}

// run runs the workers until ctx ends, then gives deliveries in flight
// StopGrace to finish before cancelling them.
func (d *Dispatcher) run(ctx context.Context) {
	d.mu.Lock()
	hardEnd, stopListening := d.hardEnd, d.stopListening
	d.mu.Unlock()
	var wg sync.WaitGroup
	for i := range d.cfg.Workers {
		wg.Go(func() { d.work(ctx, fmt.Sprintf("%s/%d", d.cfg.Owner, i)) })
	}
	wg.Go(func() { d.retentionLoop(ctx) })
	wg.Go(func() {
		<-ctx.Done()
		stopListening()
	})
	wg.Go(func() { d.heartbeatLoop(ctx) })
	// Once stopping, deliveries in flight get StopGrace, then are
	// cancelled.
	context.AfterFunc(ctx, func() {
		t := time.AfterFunc(d.cfg.StopGrace, hardEnd)
		wg.Wait()
		t.Stop()
	})
	wg.Wait()
	d.closeClaimPool()
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
//
// Aggregates may have a larger share (orderedShare): once a destination
// is claimed for, its ordered claim may lease up to that, less what the
// worker holds.
func (d *Dispatcher) claimable(limit int, held, sizes map[string]int) (c claimCaps, atShare bool) {
	table := d.routes.Load()
	for _, name := range table.names {
		route := table.routes[name]
		share := d.share(route)
		// Like the window itself, a destination is claimed for only once
		// half its share is free, so that claims stay large.
		free := share - held[name]
		if free < max(share/2, 1) {
			atShare = atShare || share > 0
			continue
		}
		c.names = append(c.names, name)
		c.unordered = append(c.unordered, int32(min(free, limit)))
		c.ordered = append(c.ordered, int32(min(d.orderedShare(route, share, sizes[name])-held[name], limit)))
	}
	rand.Shuffle(len(c.names), func(i, j int) {
		c.names[i], c.names[j] = c.names[j], c.names[i]
		c.unordered[i], c.unordered[j] = c.unordered[j], c.unordered[i]
		c.ordered[i], c.ordered[j] = c.ordered[j], c.ordered[i]
	})
	return c, atShare
}

// claimCaps are the destinations a claim may lease from, and how many
// deliveries each may still take: of unordered messages, and of
// aggregates (claimable).
type claimCaps struct {
	names     []string
	unordered []int32
	ordered   []int32
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

// fastGroupSize is the unordered group size (worker.groupSizes) from
// which a destination counts as keeping up fast: two deliveries in a row
// went through since its last failure (the ramp: 1, 2, 4), at 5 ms a
// message or less (unorderedGroupTime / 4). With an AggregateBatch under
// 4 no destination gets there, and aggregates keep the share.
const fastGroupSize = 4

// orderedShare is the most aggregates of route's destination one worker
// may hold, given its share and its unordered group size there (size, 0:
// pace not known): half the window, whatever its bulkhead, where the
// destination keeps up fast and has no rate limit; its share elsewhere.
// Under offered load an aggregate brings one or two messages to a claim,
// and at twice a bulkhead of 16 the ordered claims leased too few of them
// to keep up at about 2,000 messages a second on two cores
// (BENCHMARKS.md, "Offered load at 1,000 and 5,000 a second on a fresh
// machine"). Unordered messages keep their share: there a delivery grows
// with the pace instead, and the larger share made their claims larger
// and drains slower ("A fast destination's share of half the window").
// A rate-limited destination's fast pace may only mean that its burst's
// tokens are not spent yet.
func (d *Dispatcher) orderedShare(route Route, share, size int) int {
	if share == 0 || size < fastGroupSize {
		return share
	}
	if g := route.Guard; g != nil && g.Config().Rate > 0 {
		return share
	}
	return max(share, d.cfg.BatchSize/2)
}

// claimedMessage is a leased message as a claim returns it. An ordered one
// (AggregateID not empty) is held under its aggregate's lease, an
// unordered first try under its stretch's (Stretch not 0: stretch.go).
type claimedMessage struct {
	queries.OutboxClaimUnorderedRow
	AggregateSeq          int64
	AggregateLeaseVersion int64
	// Counted is true when the claim counted this delivery's attempt
	// (Attempts includes it; a release gives it back). An ordered message
	// behind its aggregate's first, or in a stretch, is counted at
	// finalize, if tried: Attempts then already says which attempt it
	// would be.
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
