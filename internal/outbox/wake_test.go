package outbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// waitingIn reports how many calls wait for the Notifier's next NOTIFY.
func (n *Notifier) waitingIn() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.next == nil {
		return 0
	}
	return n.next.waiters
}

// Calls made while a NOTIFY is in flight share the next one, and none of
// them returns before that next one has begun: a wake-up sent before a
// caller's call (and so perhaps before its commit) must not answer it.
func TestNotifierSendsOneNotifyForTheCallsMadeDuringOne(t *testing.T) {
	t.Parallel()
	var begun atomic.Int32
	started := make(chan struct{}, 1)
	gate := make(chan struct{})
	n := &Notifier{send: func(context.Context) error {
		if begun.Add(1) == 1 {
			started <- struct{}{}
			<-gate
		}
		return nil
	}}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- n.Notify(ctx) }()
	testwait.For(t, 10*time.Second, "the first NOTIFY to begin", started)

	const callers = 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			err := n.Notify(ctx)
			if err == nil && begun.Load() < 2 {
				err = errors.New("a call made during the first NOTIFY returned before the second began")
			}
			errs <- err
		})
	}
	testwait.Until(t, 10*time.Second, "every call to wait for the next NOTIFY", func() bool { return n.waitingIn() == callers })
	require.Equal(t, int32(1), begun.Load(), "no second NOTIFY while the first is in flight")
	close(gate)
	require.NoError(t, testwait.For(t, 10*time.Second, "the first call to return", first))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(2), begun.Load(), "one NOTIFY for the first call, one for the twenty made during it")

	// Idle again: the next call sends a NOTIFY of its own.
	require.NoError(t, n.Notify(ctx))
	require.Equal(t, int32(3), begun.Load())
}

// A Notifier starts its NOTIFYs at least its interval apart: the first
// call after a quiet spell waits for nothing; the calls made within the
// interval wait for its end, and share one NOTIFY then.
func TestNotifierStartsItsNotifiesAnIntervalApart(t *testing.T) {
	t.Parallel()
	var begun atomic.Int32
	asked := make(chan time.Duration, 1)
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	n := &Notifier{send: func(context.Context) error { begun.Add(1); return nil }, every: time.Hour,
		sleep: func(d time.Duration) { asked <- d; <-release }}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- n.Notify(ctx) }()
	require.NoError(t, testwait.For(t, 10*time.Second, "the first call, answered at once", first))
	require.Equal(t, int32(1), begun.Load())

	const callers = 20
	errs := make(chan error, callers)
	for range callers {
		go func() { errs <- n.Notify(ctx) }()
	}
	waited := testwait.For(t, 10*time.Second, "the next NOTIFY to wait for the interval", asked)
	require.True(t, waited > 59*time.Minute && waited <= time.Hour, "waits out the rest of the interval, not %v", waited)
	testwait.Until(t, 10*time.Second, "every call to wait for it", func() bool { return n.waitingIn() == callers })
	require.Equal(t, int32(1), begun.Load(), "no NOTIFY within the interval")
	releaseAll()
	for range callers {
		require.NoError(t, testwait.For(t, 10*time.Second, "a call to return", errs))
	}
	require.Equal(t, int32(2), begun.Load(), "one NOTIFY for the twenty calls")
}

// A failed NOTIFY's error reaches every call it answers; a caller whose
// context ends stops waiting without the others.
func TestNotifierReturnsTheRoundsErrorAndHonoursTheContext(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection refused")
	gate := make(chan struct{})
	n := &Notifier{send: func(context.Context) error {
		<-gate
		return boom
	}}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- n.Notify(context.Background()) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { cancelled <- n.Notify(ctx) }()
	cancel()
	require.ErrorIs(t, testwait.For(t, 10*time.Second, "the cancelled call to return", cancelled), context.Canceled)
	close(gate)
	for range 2 {
		require.ErrorIs(t, testwait.For(t, 10*time.Second, "a call to return", errs), boom)
	}
}

// A call whose context has already ended returns at once and sends
// nothing.
func TestNotifierSendsNothingForAnEndedContext(t *testing.T) {
	t.Parallel()
	blocked := make(chan struct{})
	t.Cleanup(func() { close(blocked) })
	n := &Notifier{send: func(context.Context) error {
		<-blocked
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, n.Notify(ctx), context.Canceled)
	n.mu.Lock()
	defer n.mu.Unlock()
	require.False(t, n.sending, "a NOTIFY was started for it")
	require.Nil(t, n.next, "a NOTIFY is queued for it")
}

// Through PostgreSQL: many enqueuers' calls at once are all answered and
// wake a listener, with at most one NOTIFY per call (how many they share
// is proven above, where the test decides when each call is made).
func TestNotifierWakesListenersThroughPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	listener, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, "LISTEN "+WakeChannel.Name)
	require.NoError(t, err)

	counted := countNotifies(t, pool)
	n := NewNotifier(counted.pool, 0)
	const callers = 64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() { errs <- n.Notify(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	sent := counted.n.Load()
	require.GreaterOrEqual(t, sent, int32(1))
	require.LessOrEqual(t, sent, int32(callers))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	note, err := listener.Conn().WaitForNotification(wctx)
	require.NoError(t, err, "the listener is woken")
	require.Equal(t, WakeChannel.Name, note.Channel)
	t.Logf("%d calls, %d NOTIFYs", callers, sent)
}

// Notify's transaction commits without waiting for the WAL flush, and
// that setting ends with it: the connection's next transactions (an
// enqueue's, perhaps) commit as durably as before.
func TestNotifyLeavesTheConnectionsCommitsDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := setup(t).Config().Copy()
	cfg.MaxConns = 1
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET synchronous_commit = on") // the test cluster's default is off
		return err
	}
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer one.Close()
	require.NoError(t, Notify(ctx, one))
	require.NoError(t, NewNotifier(one, 0).Notify(ctx))
	var setting string
	require.NoError(t, one.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting))
	require.Equal(t, "on", setting)
}

// Notify is a statement prepared once per connection whose plan is kept:
// sent without arguments, pgx used the simple protocol, and PostgreSQL
// planned the NOTIFY at every call (BENCHMARKS.md, "The NOTIFY planned
// once").
func TestNotifyIsPreparedOnceAndKeepsItsPlan(t *testing.T) {
	t.Parallel()
	one := oneSessionPool(t, setup(t))
	const calls = 8
	for range calls {
		require.NoError(t, Notify(context.Background(), one))
	}
	statements, generic, custom := preparedStatements(t, one, "OutboxNotify")
	require.Equal(t, 1, statements, "one prepared statement for every call")
	require.Equal(t, calls, generic+custom, "each call ran the prepared statement")
	require.Positive(t, generic, "the plan is kept once PostgreSQL has chosen it")
}

// notifyCounter is a pool on the test's database that counts the NOTIFYs
// sent through it.
type notifyCounter struct {
	pool *pgxpool.Pool
	n    atomic.Int32
}

func countNotifies(t *testing.T, base *pgxpool.Pool) *notifyCounter {
	t.Helper()
	c := &notifyCounter{}
	cfg := base.Config().Copy()
	cfg.ConnConfig.Tracer = notifyTracer{&c.n}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c.pool = pool
	return c
}

// notifyTracer counts the statements that send a NOTIFY.
type notifyTracer struct{ n *atomic.Int32 }

func (t notifyTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "pg_notify") {
		t.n.Add(1)
	}
	return ctx
}

func (notifyTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The first notification wakes the workers at once; those within the
// cooldown after it wake them once more, together, when it ends; one after
// the cooldown wakes them at once again; stop drops a wake-up still due.
// The clock and the timer are the test's.
func TestNotificationsWakeTheWorkersAtMostOncePerCooldown(t *testing.T) {
	t.Parallel()
	const cooldown = 5 * time.Millisecond
	woken := 0
	gate := newWakeGate(cooldown, func() { woken++ })
	now := time.Unix(1_000_000, 0)
	gate.now = func() time.Time { return now }
	type timer struct {
		wait    time.Duration
		fire    func()
		stopped bool
	}
	var timers []*timer
	gate.afterFunc = func(wait time.Duration, fire func()) func() bool {
		tm := &timer{wait: wait, fire: fire}
		timers = append(timers, tm)
		return func() bool { tm.stopped = true; return true }
	}

	gate.notified()
	require.Equal(t, 1, woken, "the first notification wakes at once")
	now = now.Add(time.Millisecond)
	for range 5 {
		gate.notified()
	}
	require.Equal(t, 1, woken, "the others wait for the cooldown")
	require.Len(t, timers, 1, "one wake-up due for all of them")
	require.Equal(t, cooldown-time.Millisecond, timers[0].wait, "when the cooldown ends")
	now = now.Add(timers[0].wait)
	timers[0].fire()
	require.Equal(t, 2, woken, "once for all of them")

	now = now.Add(cooldown)
	gate.notified()
	require.Equal(t, 3, woken, "after a quiet cooldown, at once again")
	require.Len(t, timers, 1)

	gate.notified()
	require.Len(t, timers, 2)
	gate.stop()
	require.True(t, timers[1].stopped, "stop stops the wake-up due")
	timers[1].fire() // as a timer that fired while being stopped would
	require.Equal(t, 3, woken, "and a wake-up due when it stopped wakes nothing")
}
