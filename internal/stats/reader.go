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

// Reader serves the stored snapshot to viewers. However many ask at once,
// it reads the row at most once per TTL per process: viewers cost the
// database nothing more than one primary-key read a few times a second.
// Safe for concurrent use.
type Reader struct {
	db  queries.DBTX
	ttl time.Duration

	mu      sync.Mutex // held while reading, so concurrent misses share one read
	cached  Stored     // guarded by mu
	fetched time.Time  // guarded by mu; when cached was read (local clock)
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
// between reads.
func (r *Reader) Get(ctx context.Context) (Stored, error) {
	return r.get(ctx, 0, false)
}

// GetAtLeast is Get for a viewer that was told of snapshot version
// minVersion (the change feed's stats event carries it): a cached copy
// older than that is read again. fresh asks for a row read after the call
// began (a viewer that reconnected and may have missed anything);
// concurrent callers still share one read.
func (r *Reader) GetAtLeast(ctx context.Context, minVersion int64, fresh bool) (Stored, error) {
	return r.get(ctx, minVersion, fresh)
}

func (r *Reader) get(ctx context.Context, minVersion int64, fresh bool) (Stored, error) {
	asked := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	usable := !r.fetched.IsZero() && r.cached.Version >= minVersion &&
		time.Since(r.fetched) < r.ttl && (!fresh || r.fetched.After(asked))
	if usable {
		s := r.cached
		s.ReadAt = s.ReadAt.Add(time.Since(r.fetched))
		return s, nil
	}
	row, err := queries.New(r.db).StatsSnapshotGet(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, fmt.Errorf("stats: the snapshot row is missing (migration 00008)")
	}
	if err != nil {
		return Stored{}, fmt.Errorf("stats: read snapshot: %w", err)
	}
	snap, err := decode(row.Snapshot)
	if err != nil {
		return Stored{}, fmt.Errorf("stats: decode snapshot version %d: %w", row.Version, err)
	}
	r.cached = Stored{Snapshot: snap, Version: row.Version, ComputedAt: row.ComputedAt, Leader: row.Leader, ReadAt: row.ReadAt}
	r.fetched = time.Now()
	return r.cached, nil
}
