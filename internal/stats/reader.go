package stats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
)

// DefaultCacheTTL is how long a Reader reuses the row it read.
const DefaultCacheTTL = 250 * time.Millisecond

// readTimeout bounds one read of the snapshot row. The read belongs to no
// caller (others may be waiting for it), so it has a deadline of its own.
const readTimeout = 5 * time.Second

// Reader serves the stored snapshot to viewers. However many ask at once,
// it reads the row at most once per TTL per process: viewers cost the
// database nothing more than one primary-key read a few times a second.
//
// Reads are single-flight: at most one read of the row is in flight, and
// callers that need one while it runs wait for its result or for their own
// context, whichever comes first. A caller that gives up does not cancel
// the read for the others; no lock is held while the database is asked.
// Safe for concurrent use.
type Reader struct {
	db  queries.DBTX
	ttl time.Duration

	mu      sync.Mutex
	cached  Stored    // guarded by mu
	fetched time.Time // guarded by mu; when cached was read (local clock); zero: never
	began   time.Time // guarded by mu; when the read that produced cached began
	flight  *flight   // guarded by mu; the read in flight, nil when none
	waiting int       // guarded by mu; callers waiting for a flight (tests watch it)
}

// flight is one read of the row. s and err are written before done is
// closed and only read after.
type flight struct {
	began time.Time
	done  chan struct{}
	s     Stored
	err   error
}

// NewReader returns a Reader on db; ttl <= 0 means DefaultCacheTTL.
func NewReader(db queries.DBTX, ttl time.Duration) *Reader {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	return &Reader{db: db, ttl: ttl}
}

// Get returns the latest stored snapshot, at most TTL old. Its ReadAt is
// advanced by the local time elapsed since the read, so ages keep moving
// between reads. It returns ctx's error if ctx ends before the read does.
func (r *Reader) Get(ctx context.Context) (Stored, error) {
	return r.get(ctx, 0, false)
}

// GetAtLeast is Get for a viewer that was told of snapshot version
// minVersion (the change feed's stats event carries it): a cached copy
// older than that is read again. fresh asks for a row read that began
// after the call did (a viewer that reconnected and may have missed
// anything); concurrent callers still share one read.
func (r *Reader) GetAtLeast(ctx context.Context, minVersion int64, fresh bool) (Stored, error) {
	return r.get(ctx, minVersion, fresh)
}

func (r *Reader) get(ctx context.Context, minVersion int64, fresh bool) (Stored, error) {
	asked := time.Now()
	for {
		r.mu.Lock()
		usable := !r.fetched.IsZero() && r.cached.Version >= minVersion &&
			time.Since(r.fetched) < r.ttl && (!fresh || !r.began.Before(asked))
		if usable {
			s := r.cached
			s.ReadAt = s.ReadAt.Add(time.Since(r.fetched))
			r.mu.Unlock()
			return s, nil
		}
		f := r.flight
		if f == nil {
			f = &flight{began: time.Now(), done: make(chan struct{})}
			r.flight = f
			go r.read(ctx, f)
		}
		r.waiting++
		r.mu.Unlock()

		select {
		case <-f.done:
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
		select {
		case <-f.done:
		default:
			return Stored{}, fmt.Errorf("stats: read snapshot: %w", ctx.Err())
		}
		// A read that began after this call is the answer, whatever it
		// holds. One that began before is, only if it is what was asked
		// for; otherwise the next read (at most one more) is.
		if f.err != nil || !f.began.Before(asked) || (!fresh && f.s.Version >= minVersion) {
			return f.s, f.err
		}
	}
}

// read runs flight f on a context of its own (the caller's values, not its
// cancellation or deadline), stores a good result in the cache, and ends
// the flight.
func (r *Reader) read(ctx context.Context, f *flight) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	f.s, f.err = r.readRow(ctx)
	r.mu.Lock()
	if f.err == nil {
		r.cached, r.fetched, r.began = f.s, time.Now(), f.began
	}
	r.flight = nil
	r.mu.Unlock()
	close(f.done)
}

func (r *Reader) readRow(ctx context.Context) (Stored, error) {
	row, err := queries.New(r.db).StatsSnapshotGet(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, fmt.Errorf("stats: the snapshot row is missing (migrations/00006_stats.sql)")
	}
	if err != nil {
		return Stored{}, fmt.Errorf("stats: read snapshot: %w", err)
	}
	snap, err := decode(row.Snapshot)
	if err != nil {
		return Stored{}, fmt.Errorf("stats: decode snapshot version %d: %w", row.Version, err)
	}
	return Stored{Snapshot: snap, Version: row.Version, ComputedAt: row.ComputedAt, Leader: row.Leader, ReadAt: row.ReadAt}, nil
}

// waiters reports how many callers wait for a read; tests use it to know
// that every caller they started is waiting.
func (r *Reader) waiters() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting
}
