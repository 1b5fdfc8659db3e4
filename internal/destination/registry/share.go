package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/queries"
)

// DefaultShareInterval is how often Watch shares the breakers' outcomes.
const DefaultShareInterval = time.Second

// DefaultHeadWait is the longest an aggregate's head waits for its retry,
// with messages queued behind it, once its destination delivers again.
const DefaultHeadWait = 5 * time.Second

// shareRetention is how long shared outcomes are kept: longer than any
// breaker's window, so that a process that starts reads a full one.
const shareRetention = 5 * time.Minute

// probeAfterTraffic is how long after its last delivery ended a healthy
// destination's waiting heads are still brought forward at every Share. A
// head's failure is counted when its answer arrives, but its backoff is
// written by the finalize that follows: a probe made in between finds the
// head still leased, and without probes after it the head would wait its
// whole backoff on a destination that has fallen idle. A lease bounds how
// late that finalize can come; a minute covers the default's.
const probeAfterTraffic = time.Minute

// Share adds the outcomes the routes' breakers counted since the last Share
// to switchyard.breaker_outcomes (under Config.Owner), and gives each
// breaker the other processes' outcomes of its window (guard.SetPeers):
// one statement for all destinations, off the delivery path. Then it
// brings forward the retries of waiting aggregate heads of destinations
// that deliver again (see probeSooner). Outcomes that
// could not be written are given back to their guards for the next Share.
func (r *Registry) Share(ctx context.Context) error {
	now := time.Now()
	p := queries.BreakerOutcomeShareParams{Owner: r.cfg.Owner, RetentionMs: shareRetention.Milliseconds()}
	for name := range r.health {
		if _, ok := r.built[name]; !ok {
			delete(r.health, name) // the destination is gone
		}
	}
	if r.health == nil {
		r.health = map[string]health{}
	}
	for name, b := range r.built {
		g := b.route.Guard
		successes, failures := g.TakeOutcomes()
		h := r.health[name]
		h.successes += int64(successes)
		h.failures += int64(failures)
		if successes+failures > 0 {
			h.lastOutcome = now
		}
		r.health[name] = h
		p.AddDestinations = append(p.AddDestinations, name)
		p.AddSuccesses = append(p.AddSuccesses, int64(successes))
		p.AddFailures = append(p.AddFailures, int64(failures))
		p.Destinations = append(p.Destinations, name)
		p.LookbackMs = append(p.LookbackMs, g.Lookback().Milliseconds())
	}
	if len(p.Destinations) == 0 {
		return nil
	}
	rows, err := queries.New(r.pool).BreakerOutcomeShare(ctx, p)
	if err != nil {
		// Outcomes go back for the next share only when the statement
		// surely did not commit (the server refused it, or it was never
		// sent). After a lost answer it may have committed: counting them
		// twice could open the other processes' breakers, dropping a
		// second's outcomes cannot.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
			for i, name := range p.AddDestinations {
				r.built[name].route.Guard.ReturnOutcomes(uint64(p.AddSuccesses[i]), uint64(p.AddFailures[i]))
			}
		}
		return fmt.Errorf("share breaker outcomes: %w", err)
	}
	for _, row := range rows {
		if b, ok := r.built[row.Destination]; ok {
			b.route.Guard.SetPeers(uint64(row.Successes), uint64(row.Failures))
		}
	}
	for _, name := range p.AddDestinations {
		h := r.decide(name, r.health[name])
		r.health[name] = h
		if h.healthy && now.Sub(h.lastOutcome) < probeAfterTraffic && r.built[name].route.Guard.State() == guard.Closed {
			if err := r.probeSooner(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// decide makes the probe decision anew when this process's deliveries to
// the destination ended since the last one, and keeps the last one
// otherwise: it delivers again when, since then (not since the last Share,
// whose outcomes a failed statement may drop), its deliveries succeeded
// and failed less often than its breaker's ratio.
func (r *Registry) decide(name string, h health) health {
	if h.successes+h.failures == 0 {
		return h
	}
	ratio := r.built[name].route.Guard.Config().Breaker.FailureRatio
	h.healthy = h.successes > 0 && float64(h.failures) < ratio*float64(h.successes+h.failures)
	h.successes, h.failures = 0, 0
	return h
}

// probeSooner brings forward the retries of the destination's waiting
// aggregate heads. A head's backoff, drawn while the destination failed,
// can be long (full jitter up to the policy's cap) while everything
// enqueued behind it waits; so once the destination is healthy no head
// waits more than Config.HeadWait.
func (r *Registry) probeSooner(ctx context.Context, name string) error {
	n, err := queries.New(r.pool).OutboxAggregateProbeSooner(ctx, queries.OutboxAggregateProbeSoonerParams{
		Destination: name, BoundMs: r.cfg.HeadWait.Milliseconds(), SpreadMs: r.cfg.ShareInterval.Milliseconds(),
	})
	if err != nil {
		return fmt.Errorf("bring forward the waiting heads of %s: %w", name, err)
	}
	if n > 0 {
		r.cfg.Logger.Info("destination delivers again: waiting aggregate heads retried sooner",
			slog.String("destination", name), slog.Int64("aggregates", n))
	}
	return nil
}

func (r *Registry) shareLogged(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, r.cfg.ShareInterval)
	defer cancel()
	if err := r.Share(qctx); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("breakers decide on this process's outcomes alone for now", slog.Any("error", err))
	}
}
