package stats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// LeaderLockKey is the session advisory lock the leader holds: "swstats".
const LeaderLockKey int64 = 0x73777374617473

// touchEvery is how often a leader with nothing new records that it is
// alive (stats_snapshot.computed_at); the console calls a snapshot older
// than three times this stale.
const touchEvery = 5 * time.Second

// ErrStarted: Start was called twice.
var ErrStarted = service.ErrStarted

// Config configures a Service. Zero fields take the documented defaults.
type Config struct {
	// Owner names this instance in stats_snapshot.leader. Default "stats".
	Owner string
	// Logger receives leadership changes and failed ticks. Default: discard.
	Logger *slog.Logger
	// Interval between two snapshots while leading. Default 500ms, so a
	// dashboard shows an enqueue within a second. A tick that took d waits
	// at least 4*d before the next, so a slow database is not hammered.
	Interval time.Duration
	// RetryInterval is how often a follower tries to become the leader.
	// Default 2s.
	RetryInterval time.Duration
	// MaxRows bounds every count the leader reads from an index. Default
	// 100,000.
	MaxRows int32
	// ReceivedEvery is the fewest ticks between two counts of inbox
	// events received (the costliest read, done only when new events
	// arrived). Default 4.
	ReceivedEvery int
}

func (c Config) withDefaults() Config {
	if c.Owner == "" {
		c.Owner = "stats"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Interval <= 0 {
		c.Interval = 500 * time.Millisecond
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = 2 * time.Second
	}
	if c.MaxRows <= 0 {
		c.MaxRows = 100_000
	}
	if c.ReceivedEvery <= 0 {
		c.ReceivedEvery = 4
	}
	return c
}

// Service competes for leadership and, while it leads, computes and stores
// snapshots. Start it once; Stop it once or more.
type Service struct {
	pool *pgxpool.Pool
	cfg  Config

	life service.Lifecycle
}

// New returns a Service reading and writing through pool.
func New(pool *pgxpool.Pool, cfg Config) *Service {
	return &Service{pool: pool, cfg: cfg.withDefaults()}
}

// Start runs the service in the background until Stop.
func (s *Service) Start(ctx context.Context) error {
	return s.life.Start(ctx, nil, s.run)
}

// Stop ends the service, releasing leadership, and waits for it.
func (s *Service) Stop() { s.life.Stop() }

func (s *Service) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.tryLead(ctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("statistics leader stopped", slog.Any("error", err))
		}
		if !sleep(ctx, s.cfg.RetryInterval) {
			return
		}
	}
}

// tryLead takes a connection out of the pool for good, takes the leader
// lock on it, and leads until an error or ctx ends. Every statement of the
// leader runs on that connection, so a leader whose connection (and with
// it the lock) is gone cannot write beside a new leader. Closing the
// connection releases the lock.
func (s *Service) tryLead(ctx context.Context) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("stats: acquire connection: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	q := queries.New(conn)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	got, err := q.StatsLeaderTryLock(lctx, LeaderLockKey)
	cancel()
	if err != nil {
		return fmt.Errorf("stats: take leader lock: %w", err)
	}
	if !got {
		return nil
	}
	s.cfg.Logger.Info("statistics leader elected", slog.String("owner", s.cfg.Owner))
	return s.lead(ctx, conn)
}

func (s *Service) lead(ctx context.Context, conn *pgx.Conn) error {
	c := newComputer(queries.New(conn), s.cfg)
	var last []byte
	var written time.Time
	for {
		began := time.Now()
		saved, doc, err := s.tick(ctx, c, last)
		if err != nil {
			return err
		}
		if !saved && time.Since(written) > touchEvery {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.q.StatsSnapshotTouch(tctx, s.cfg.Owner)
			cancel()
			if err != nil {
				return fmt.Errorf("stats: touch snapshot: %w", err)
			}
			written = time.Now()
		}
		if saved {
			last, written = doc, time.Now()
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := changefeed.Notify(nctx, s.pool); err != nil && ctx.Err() == nil {
				// Listeners poll: a lost wake-up delays, never loses.
				s.cfg.Logger.Warn("statistics notify failed", slog.Any("error", err))
			}
			cancel()
		}
		// A slow tick (a busy database) spaces the next ones out: the
		// leader spends at most a fifth of its time computing.
		wait := max(s.cfg.Interval, 4*time.Since(began))
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// tick computes one snapshot and stores it if it differs from the last
// one; it returns the comparison key of what is stored.
func (s *Service) tick(ctx context.Context, c *computer, last []byte) (bool, []byte, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := c.compute(tctx)
	if err != nil {
		return false, nil, err
	}
	// An empty window does not change by sliding: compare without its
	// start, so an idle cluster announces nothing.
	same := snap
	if same.Series.empty() {
		same.Series.Start = 0
	}
	key, err := json.Marshal(same)
	if err != nil {
		return false, nil, fmt.Errorf("stats: encode snapshot: %w", err)
	}
	if bytes.Equal(key, last) {
		return false, last, nil
	}
	doc, err := json.Marshal(snap)
	if err != nil {
		return false, nil, fmt.Errorf("stats: encode snapshot: %w", err)
	}
	if _, err := c.q.StatsSnapshotSave(tctx, queries.StatsSnapshotSaveParams{Leader: s.cfg.Owner, Snapshot: doc, NewestOutboxID: snap.NewestOutboxID, NewestDeliveryUs: snap.NewestDeliveryUS}); err != nil {
		return false, nil, fmt.Errorf("stats: save snapshot: %w", err)
	}
	return true, key, nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
