package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/internal/postgres"
)

// The fault kinds, as --faults names them.
const (
	FaultKill9         = "kill9"           // kill -9 of a dispatcher, restarted
	FaultStop          = "sigstop"         // SIGSTOP past the lease, then SIGCONT
	FaultTerminate     = "terminate"       // pg_terminate_backend of random backends
	FaultPGFast        = "pg-restart-fast" // PostgreSQL fast shutdown and start
	FaultPGImmediate   = "pg-restart-immediate"
	FaultDestLatency   = "dest-latency"   // the destination proxy delays
	FaultDestReset     = "dest-reset"     // ... resets every connection
	FaultDestBlackHole = "dest-blackhole" // ... holds every packet
	FaultPGPartition   = "pg-partition"   // the PostgreSQL proxy holds every packet
	FaultErrorBurst    = "error-burst"    // the destination fails every attempt
)

// AllFaults is the default mix.
var AllFaults = []string{FaultKill9, FaultStop, FaultTerminate, FaultPGFast, FaultPGImmediate,
	FaultDestLatency, FaultDestReset, FaultDestBlackHole, FaultPGPartition, FaultErrorBurst}

// injector runs the seeded fault schedule.
type injector struct {
	db       *database
	procs    *procs
	dest     *proxy
	receiver *receiver
	lease    time.Duration
	mix      []string
	logger   *slog.Logger

	mu     sync.Mutex
	counts map[string]int
}

// run injects one fault after another, a seeded pause of 1–3 s between
// them, until ctx ends; every kind of the mix once first, in a seeded
// order, and that first pass is finished even if ctx ends before it, so
// every run injects each kind. Each fault is undone
// before the next starts.
func (in *injector) run(ctx context.Context, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 4))
	mix := slices.Clone(in.mix)
	if !in.db.restartable() {
		mix = slices.DeleteFunc(mix, func(k string) bool { return k == FaultPGFast || k == FaultPGImmediate })
	}
	if len(mix) == 0 {
		return
	}
	order := slices.Clone(mix)
	rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i := 0; ; i++ {
		// The first pass over every kind is finished even after ctx ended:
		// on a loaded machine the faults take longer than the run.
		fctx := ctx
		if i < len(order) {
			fctx = context.WithoutCancel(ctx)
		}
		if !pause(fctx, time.Second+time.Duration(rnd.Int64N(int64(2*time.Second)))) {
			return
		}
		kind := mix[rnd.IntN(len(mix))]
		if i < len(order) {
			kind = order[i]
		}
		if err := in.inject(fctx, kind, rnd); err != nil {
			in.logger.Warn("fault not injected", slog.String("fault", kind), slog.Any("error", err))
			continue
		}
		in.mu.Lock()
		in.counts[kind]++
		in.mu.Unlock()
	}
}

// pause waits d or until ctx ends; false when ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (in *injector) inject(ctx context.Context, kind string, rnd *rand.Rand) error {
	slot := rnd.IntN(len(in.procs.running))
	hold := time.Second + time.Duration(rnd.Int64N(int64(3*time.Second)))
	in.logger.Info("fault", slog.String("kind", kind), slog.Int("dispatcher", slot), slog.Duration("hold", hold))
	switch kind {
	case FaultKill9:
		return in.procs.kill9(slot)
	case FaultStop:
		if err := in.procs.signal(slot, syscall.SIGSTOP); err != nil {
			return err
		}
		pause(context.WithoutCancel(ctx), in.lease+2*time.Second) // a zombie: its lease runs out
		return in.procs.signal(slot, syscall.SIGCONT)
	case FaultTerminate:
		return in.terminate(ctx, rnd.IntN(6))
	case FaultPGFast, FaultPGImmediate:
		// Never cut short: a restart the run's end interrupts leaves no server.
		return in.db.restart(context.WithoutCancel(ctx), kind == FaultPGImmediate)
	case FaultDestReset:
		in.dest.reset()
		return nil
	case FaultErrorBurst:
		in.receiver.setFailRatio(1)
		pause(context.WithoutCancel(ctx), hold+3*time.Second)
		in.receiver.setFailRatio(failRatio)
		return nil
	}
	return in.degrade(ctx, kind, hold, rnd)
}

// degrade makes a proxy slow or a black hole for hold, then heals it.
func (in *injector) degrade(ctx context.Context, kind string, hold time.Duration, rnd *rand.Rand) error {
	p, mode, delay := in.dest, blackHole, time.Duration(0)
	switch kind {
	case FaultDestLatency:
		mode, delay = slow, 50*time.Millisecond+time.Duration(rnd.Int64N(int64(500*time.Millisecond)))
	case FaultDestBlackHole:
	case FaultPGPartition:
		p = in.db.proxy
	default:
		return fmt.Errorf("unknown fault %q", kind)
	}
	p.set(mode, delay)
	pause(context.WithoutCancel(ctx), hold)
	p.set(passThrough, 0)
	return nil
}

func (in *injector) faults() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]int, len(in.mix))
	for _, k := range in.mix {
		out[k] = in.counts[k]
	}
	return out
}

// victimApps are the application names of the run's own sessions: the
// console processes' (their pools and LISTEN connections) and the
// enqueuer's. The terminate fault kills only these: with DATABASE_URL the
// database may hold other applications' sessions, which are not the run's
// to kill.
var victimApps = []string{postgres.DefaultApplicationName, enqueuerApp, feedWriterApp}

// terminate ends 1 + extra of the run's own backends, chosen at random.
func (in *injector) terminate(ctx context.Context, extra int) error {
	_, err := in.db.admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
		  AND application_name = ANY($2::text[])
		ORDER BY random() LIMIT 1 + $1::int`, extra, victimApps)
	if err != nil {
		return fmt.Errorf("terminate backends: %w", err)
	}
	return nil
}
