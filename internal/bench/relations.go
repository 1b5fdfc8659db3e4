package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// serverRelationsShown is how many tables and indexes, those whose buffers
// were touched most, a drain reports.
const serverRelationsShown = 12

// relationsQuiesceWait bounds a drain's wait for a pool's backends to
// exit (quiesce).
const relationsQuiesceWait = 10 * time.Second

// Application names: the bench's own connections (seeding, checks) and
// the dispatcher's, told apart in pg_stat_activity so that the end of a
// drain can wait for the dispatcher's backends alone to exit.
const (
	benchApplication      = "switchyard-bench"
	dispatcherApplication = "switchyard-bench-dispatcher"
)

// serverRelation is one table's or index's shared buffers over a drain's
// measured phase, from pg_statio_user_tables and _indexes: which relation
// a statement's buffers (server_statements) went to. A statement touching
// more buffers after a retained history than on an empty outbox says
// only that it does; this says where (issue 17, target 6).
type serverRelation struct {
	Name    string `json:"name"`    // the table's or the index's
	Buffers int64  `json:"buffers"` // hit or read (an index: its own pages; a table: its heap's)
	Read    int64  `json:"read"`    // of which read from outside shared buffers
}

// relationSample is pg_statio's counters for the switchyard schema's
// tables and indexes, by name.
type relationSample map[string]serverRelation

// sampleRelations reads pg_statio's counters for the switchyard schema of
// pool's database, once no backend of that database named application
// (but the one reading) is left: a backend adds its counters to the
// server's when it goes idle, at most once a second, and when it exits, so
// a sample taken while they run misses up to the last second of their
// work. The caller closes those backends' connections first. Where they
// have not all exited after wait it logs why and returns nil: the figures
// are a diagnostic, not the bench's result.
func sampleRelations(ctx context.Context, pool *pgxpool.Pool, application string, wait time.Duration, logger *slog.Logger) (relationSample, error) {
	if quiet, err := quiesce(ctx, pool, application, wait); err != nil || !quiet {
		if err == nil {
			logger.Warn("no relation statistics: backends still connected", slog.String("application_name", application))
		}
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT relname, heap_blks_hit + heap_blks_read, heap_blks_read
			FROM pg_statio_user_tables WHERE schemaname = 'switchyard'
		UNION ALL
		SELECT indexrelname, idx_blks_hit + idx_blks_read, idx_blks_read
			FROM pg_statio_user_indexes WHERE schemaname = 'switchyard'`)
	if err != nil {
		return nil, fmt.Errorf("read pg_statio: %w", err)
	}
	defer rows.Close()
	s := relationSample{}
	for rows.Next() {
		var r serverRelation
		if err := rows.Scan(&r.Name, &r.Buffers, &r.Read); err != nil {
			return nil, fmt.Errorf("read pg_statio: %w", err)
		}
		s[r.Name] = r
	}
	return s, rows.Err()
}

// quiesce waits until pool's database has no backend named application
// but the one asking, at most wait; false when some are still there.
func quiesce(ctx context.Context, pool *pgxpool.Pool, application string, wait time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	for {
		var left int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`, application).Scan(&left)
		if err != nil {
			return false, fmt.Errorf("wait for the backends of %s to exit: %w", application, err)
		}
		if left == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// relationsSince is what each table and index took between two samples,
// the most buffers first, at most serverRelationsShown, those untouched
// left out. nil when either sample is.
func relationsSince(start, end relationSample) []serverRelation {
	if start == nil || end == nil {
		return nil
	}
	out := []serverRelation{}
	for name, e := range end {
		s := start[name]
		if d := (serverRelation{Name: name, Buffers: e.Buffers - s.Buffers, Read: e.Read - s.Read}); d.Buffers > 0 {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b serverRelation) int {
		return cmp.Or(cmp.Compare(b.Buffers, a.Buffers), strings.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), serverRelationsShown)]
}
