package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/pglisten"
	"github.com/switchyard/switchyard/internal/queries"
)

// WakeChannel is the LISTEN/NOTIFY channel that tells idle dispatchers
// that messages were committed, for a pglisten.Listener.
var WakeChannel = pglisten.Channel{Name: "switchyard_outbox", Listen: (*queries.Queries).OutboxListen}

// Notify wakes idle dispatchers on every process, each within its
// Config.WakeCooldown of its last wake-up. Call it AFTER
// the transaction that enqueued has committed, never inside it: a NOTIFY
// inside a transaction serialises every committing transaction of the
// database. It is only an optimisation: dispatchers poll anyway
// (Config.IdlePoll); so its own commit does not wait for the WAL flush
// (queries.OutboxNotify), which would delay the wake-up. A producer that
// commits many enqueues at once shares its NOTIFYs through a Notifier.
func Notify(ctx context.Context, pool *pgxpool.Pool) error {
	if err := queries.New(pool).OutboxNotify(ctx, WakeChannel.Name); err != nil {
		return fmt.Errorf("outbox: notify: %w", err)
	}
	return nil
}

// defaultWakeCooldown is Config.WakeCooldown's default, and how far apart
// a Notifier's NOTIFYs start.
const defaultWakeCooldown = 5 * time.Millisecond

// listenWait bounds how long Start waits for the LISTEN on WakeChannel to
// be in place (startListening).
const listenWait = 5 * time.Second

// startListening wakes the workers on the notifications on WakeChannel
// (and after every reconnect of the LISTEN connection), at most once per
// Config.WakeCooldown (wakeGate), until stop is called. Without a shared
// connection (Config.Notifications) it runs one of its own. It returns
// once the LISTEN is in place, or after listenWait: a message enqueued
// after Start has returned is then never left waiting for the LISTEN
// connection to be made, a few milliseconds to tens of them on a busy
// server, with the workers idle. If the LISTEN is late, the wake-up that
// follows it still catches up on what was enqueued meanwhile.
func (d *Dispatcher) startListening(ctx context.Context) (stop func()) {
	notifications := d.cfg.Notifications
	stopOwn := func() {}
	if notifications == nil {
		notifications = pglisten.New(d.pool, pglisten.Config{Logger: d.cfg.Logger})
		if err := notifications.Start(ctx); err != nil {
			d.cfg.Logger.Error("outbox: start LISTEN connection; polling only", "error", err)
		}
		stopOwn = notifications.Stop
	}
	gate := newWakeGate(d.cfg.WakeCooldown, d.Wake)
	listening := make(chan struct{})
	var once sync.Once
	unsubscribe := notifications.Subscribe(WakeChannel, func() {
		gate.notified()
		once.Do(func() { close(listening) })
	})
	wait := time.NewTimer(listenWait)
	defer wait.Stop()
	select {
	case <-listening:
	case <-wait.C:
		d.cfg.Logger.Warn("outbox: no LISTEN yet; the workers poll until it is in place", "waited", listenWait)
	case <-ctx.Done():
	}
	return func() {
		unsubscribe()
		gate.stop()
		stopOwn()
	}
}

// wakeGate passes the notifications on WakeChannel to the workers as
// wake-ups, at most one per cooldown: a notification within the cooldown
// of the last wake-up is passed on when the cooldown ends, together with
// any others received meanwhile. A producer that notifies after every
// enqueue would otherwise have the workers claim about once per message
// under steady load, each claim two statements and a finalize after it
// for a few messages (BENCHMARKS.md, "Fewer statements per offered
// message"). The first notification after a quiet spell waits for
// nothing.
type wakeGate struct {
	cooldown time.Duration
	wake     func()
	// now and afterFunc are time.Now and time.AfterFunc (returning the
	// timer's Stop); tests replace them.
	now       func() time.Time
	afterFunc func(time.Duration, func()) (stop func() bool)

	mu      sync.Mutex            // guards the fields below
	last    time.Time             // the last wake-up passed on
	pending func() (stopped bool) // stops the wake-up due when the cooldown ends; nil if none
}

func newWakeGate(cooldown time.Duration, wake func()) *wakeGate {
	return &wakeGate{cooldown: cooldown, wake: wake, now: time.Now,
		afterFunc: func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }}
}

// notified is the subscription's callback: one notification received.
func (g *wakeGate) notified() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending != nil {
		return // the wake-up due covers this notification
	}
	now := g.now()
	if wait := g.cooldown - now.Sub(g.last); wait > 0 {
		g.pending = g.afterFunc(wait, g.due)
		return
	}
	g.last = now
	g.wake()
}

// due passes on the notifications held back, when the cooldown ends;
// nothing once stop has run.
func (g *wakeGate) due() {
	g.mu.Lock()
	if g.pending == nil {
		g.mu.Unlock()
		return
	}
	g.pending, g.last = nil, g.now()
	g.mu.Unlock()
	g.wake()
}

// stop drops a wake-up still due: the dispatcher is stopping.
func (g *wakeGate) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending != nil {
		g.pending()
		g.pending = nil
	}
}

// notifyTimeout bounds one NOTIFY sent by a Notifier for its callers.
const notifyTimeout = 10 * time.Second

// Notifier is Notify for many enqueuers that commit at once. Every NOTIFY
// is a transaction with a commit of its own (PostgreSQL gives the
// notification a transaction id), so one per enqueue doubles the commits
// of a busy producer. A Notifier has at most one NOTIFY in flight, and
// starts them no closer together than the WakeCooldown of the dispatchers
// it wakes (NewNotifier): a call made meanwhile waits for the next one,
// which covers every call made in between. A dispatcher passes on at
// most one wake-up per cooldown (wakeGate), so NOTIFYs closer together
// wake nobody sooner; sent for every enqueue, they were about a quarter
// of the server's CPU per message at 1,000 messages a second
// (BENCHMARKS.md, "Where a message's time goes under offered load", and
// "NOTIFYs paced by the Notifier").
// The first call after a quiet spell waits for nothing. A call still
// returns only after a NOTIFY that began after it: a wake-up sent after
// the caller's commit, as Notify's would be. Safe for concurrent use; the
// zero value is not usable (NewNotifier). It has nothing to stop: the
// goroutine that sends starts with a call and ends once no call waits,
// each NOTIFY bounded by notifyTimeout.
type Notifier struct {
	send func(context.Context) error
	// every is the shortest time between the starts of two NOTIFYs;
	// sleep waits (time.Sleep; tests replace it).
	every time.Duration
	sleep func(time.Duration)

	mu       sync.Mutex   // guards the fields below
	sending  bool         // a goroutine is sending rounds (run)
	next     *notifyRound // the calls waiting for a NOTIFY not yet begun
	lastSent time.Time    // when the last NOTIFY began
}

// notifyRound is one NOTIFY and the calls it answers.
type notifyRound struct {
	done    chan struct{} // closed when sent; err is set before
	err     error
	waiters int // calls in the round, guarded by Notifier.mu; read by tests only
}

// NewNotifier returns a Notifier that sends through pool, its NOTIFYs at
// least cooldown apart: the WakeCooldown of the dispatchers it wakes (0:
// their default).
func NewNotifier(pool *pgxpool.Pool, cooldown time.Duration) *Notifier {
	return &Notifier{send: func(ctx context.Context) error { return Notify(ctx, pool) },
		every: defaultDuration(cooldown, defaultWakeCooldown), sleep: time.Sleep}
}

// Notify returns once a NOTIFY that began after the call has been sent,
// with that NOTIFY's error, or ctx's if ctx ends first.
func (n *Notifier) Notify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	if n.next == nil {
		n.next = &notifyRound{done: make(chan struct{})}
	}
	r := n.next
	r.waiters++
	if !n.sending {
		n.sending = true
		go n.run()
	}
	n.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends one NOTIFY per round until no call waits, each at least
// n.every after the last began; calls made while it waits join the round.
// A round answers many callers, so it runs under none of their contexts.
func (n *Notifier) run() {
	for {
		n.mu.Lock()
		if n.next == nil {
			n.sending = false
			n.mu.Unlock()
			return
		}
		wait := n.every - time.Since(n.lastSent)
		n.mu.Unlock()
		if wait > 0 {
			n.sleep(wait)
		}
		n.mu.Lock()
		r := n.next
		n.next, n.lastSent = nil, time.Now()
		n.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		r.err = n.send(sctx)
		cancel()
		close(r.done)
	}
}
