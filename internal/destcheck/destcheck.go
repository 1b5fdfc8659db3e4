// Package destcheck rechecks, in the background, what a destination's row
// alone cannot say: whether a stream captures a JetStream destination's
// subjects. Without a stream, NATS answers every publish "no responders"
// and each message would go dead.
//
// The configuration page checks a destination when it is saved
// (internal/action), but streams are created and deleted afterwards, often
// by someone else: a Service rechecks every JetStream destination every
// Interval and keeps the verdict in switchyard.destination_checks, which
// the dashboard's status line and the configuration pages read. A verdict
// that changed appends a config change to the feed in the same
// transaction, so open configuration pages re-read their lists.
//
// Several instances may run one each: a recheck only writes what it saw,
// and a verdict is only kept for the address it was checked against (a
// save that changed the address meanwhile made its own check, which
// stands).
package destcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/destination/jetstream"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// DefaultInterval is how often a Service rechecks: a stream created or
// deleted shows on the dashboard within about this long.
const DefaultInterval = time.Minute

// maxProblemChars bounds a verdict's text, as the table's CHECK does.
const maxProblemChars = 1000

// Config configures Recheck and a Service. Every field is optional.
type Config struct {
	// NATSURL is the NATS server of the JetStream destinations.
	NATSURL string
	// Interval between passes; 0: DefaultInterval.
	Interval time.Duration
	// Check checks one destination's subject prefix and returns what is
	// wrong ("" when nothing is); nil: jetstream.CheckCapture on NATSURL.
	Check func(ctx context.Context, prefix string) string
	// Changed is called after a pass committed a changed verdict (a
	// changefeed.Notifier's Poke). It must not block.
	Changed func()
	// Logger reports failed passes; nil: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Check == nil {
		url := c.NATSURL
		c.Check = func(ctx context.Context, prefix string) string {
			if err := jetstream.CheckCapture(ctx, jetstream.Config{URL: url, SubjectPrefix: prefix}); err != nil {
				return err.Error()
			}
			return ""
		}
	}
	if c.Changed == nil {
		c.Changed = func() {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Recheck checks every JetStream destination once and keeps each verdict.
// It returns how many verdicts changed; on an error, those changed so far.
func Recheck(ctx context.Context, pool *pgxpool.Pool, cfg Config) (int, error) {
	cfg = cfg.withDefaults()
	rows, err := queries.New(pool).DestinationCheckListJetStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("destcheck: list the JetStream destinations: %w", err)
	}
	changed := 0
	for _, r := range rows {
		problem := clip(cfg.Check(ctx, r.Address))
		if ctx.Err() != nil {
			return changed, ctx.Err()
		}
		// Never checked counts as passed: only a verdict that shows
		// differently is a change.
		differs := (r.Problem == nil && problem != "") || (r.Problem != nil && *r.Problem != problem)
		took, err := record(ctx, pool, r.Name, r.Address, problem, differs)
		if err != nil {
			return changed, err
		}
		if took {
			changed++
		}
	}
	return changed, nil
}

// record keeps destination's verdict and, when it differs from the last
// one, appends a config change in the same transaction. It reports
// whether it kept a changed verdict.
func record(ctx context.Context, pool *pgxpool.Pool, destination, address, problem string, differs bool) (bool, error) {
	took := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := queries.New(tx).DestinationCheckRecord(ctx, queries.DestinationCheckRecordParams{
			Problem: problem, Destination: destination, Address: address,
		})
		if err != nil {
			return fmt.Errorf("destcheck: keep the verdict of %s: %w", destination, err)
		}
		if n == 0 || !differs {
			return nil
		}
		payload, err := json.Marshal(map[string]string{"action": "destination.recheck"})
		if err != nil {
			return fmt.Errorf("destcheck: encode the change of %s: %w", destination, err)
		}
		err = changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindConfig, Subject: "destination/" + destination, Payload: payload})
		if err != nil {
			return fmt.Errorf("destcheck: the verdict of %s changed: %w", destination, err)
		}
		took = true
		return nil
	})
	return took && err == nil, err
}

func clip(s string) string {
	if r := []rune(s); len(r) > maxProblemChars {
		return string(r[:maxProblemChars]) + "…"
	}
	return s
}

// Service runs Recheck every Interval. Start it once; Stop is idempotent.
type Service struct {
	cfg  Config
	pool *pgxpool.Pool
	loop service.Lifecycle
}

// New returns a Service on pool; Start runs it.
func New(pool *pgxpool.Pool, cfg Config) *Service {
	return &Service{cfg: cfg.withDefaults(), pool: pool}
}

// Start runs a first pass at once and then one every Interval, until
// Stop. It returns an error if already started.
func (s *Service) Start(ctx context.Context) error {
	return s.loop.Start(ctx, nil, s.run)
}

// Stop ends the service, abandoning a pass in progress (each verdict is
// its own transaction). It is idempotent.
func (s *Service) Stop() { s.loop.Stop() }

func (s *Service) run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		// A pass checks each destination within jetstream's own timeout;
		// this bounds the whole pass.
		pctx, cancel := context.WithTimeout(ctx, s.cfg.Interval+time.Minute)
		changed, err := Recheck(pctx, s.pool, s.cfg)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("recheck JetStream destinations failed", slog.Any("error", err))
		}
		if changed > 0 {
			s.cfg.Changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
