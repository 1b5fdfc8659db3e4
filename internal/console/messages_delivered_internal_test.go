package console

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/queries"
)

// The delivered list under a backlog: 300 delivered messages, then 20,000
// pending (the newest ids, as a backlog is), then 20 delivered above
// them, delivered in another order than their ids (many at the same
// instant) and the 20 before most of the 300. Each page reads a page's
// rows, not the backlog: on the primary key, the first page read all
// 20,000 pending messages below its 20th row (57 ms a page at 10,000,000
// rows, BENCHMARKS.md). The pages list every delivered message once, the
// latest delivery first, and each page says so.
func TestDeliveredPagesReadTheirRowsNotTheBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	for _, n := range []struct {
		rows    int
		state   string
		seconds string // how long before now each was delivered, by i
	}{{300, "delivered", "i % 37"}, {20000, "pending", "0"}, {20, "delivered", "30 + i"}} {
		_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
			SELECT 'order.paid', 'shop', '{}', $2::text,
				CASE WHEN $2::text = 'delivered' THEN now() - make_interval(secs => `+n.seconds+`) END
			FROM generate_series(1, $1::int) i`, n.rows, n.state)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `SELECT id FROM switchyard.outbox WHERE state = 'delivered' ORDER BY finished_at DESC, id DESC`)
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)

	scans := &scanCounter{db: pool}
	q := queries.New(scans)
	f, err := parseMessageFilter(ctx, q, url.Values{"state": {"delivered"}})
	require.NoError(t, err)
	var got []int64
	var pages [][]int64
	var newer []int64 // each page's first row: the cursor of the page above it
	before := int64(0)
	for page := 0; ; page++ {
		require.Less(t, page, 10, "more pages than messages")
		scans.read = 0
		rows, pager, err := (&Handler{}).messagePage(ctx, q, f, before, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, scans.read, int64(3*pageSize), "page %d read %d rows", page, scans.read)
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		got, pages, newer = append(got, ids...), append(pages, ids), append(newer, ids[0])
		if pager.OlderURL == "" {
			break
		}
		before = rows[len(rows)-1].ID
		require.Contains(t, pager.OlderURL, "before="+strconv.FormatInt(before, 10))
	}
	require.Equal(t, want, got)
	// Back up: the page above each page is the one before it.
	for page := len(pages) - 1; page >= 2; page-- {
		scans.read = 0
		rows, _, err := (&Handler{}).messagePage(ctx, q, f, 0, newer[page])
		require.NoError(t, err)
		require.LessOrEqual(t, scans.read, int64(3*pageSize), "the page above page %d read %d rows", page, scans.read)
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		require.Equal(t, pages[page-1], ids, "the page above page %d", page)
	}
}

// scanCounter is a queries.DBTX that runs each query under EXPLAIN
// ANALYZE before running it, and adds up the rows its plans' scans read:
// the rows they return and the rows their filters removed, over all
// their loops.
type scanCounter struct {
	db   queries.DBTX
	read int64
}

func (s *scanCounter) explain(ctx context.Context, sql string, args ...any) error {
	var out []struct{ Plan planNode }
	var plan []byte
	if err := s.db.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		return err
	}
	if err := json.Unmarshal(plan, &out); err != nil {
		return err
	}
	for _, o := range out {
		s.read += o.Plan.scanned()
	}
	return nil
}

// planNode is a node of EXPLAIN's JSON.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	RemovedByIdx float64    `json:"Rows Removed by Index Recheck"`
	Removed      float64    `json:"Rows Removed by Filter"`
	Plans        []planNode `json:"Plans"`
}

func (n planNode) scanned() int64 {
	var read int64
	switch n.NodeType {
	case "Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan":
		read = int64((n.ActualRows + n.Removed + n.RemovedByIdx) * n.ActualLoops)
	}
	for _, c := range n.Plans {
		read += c.scanned()
	}
	return read
}

func (s *scanCounter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := s.explain(ctx, sql, args...); err != nil {
		return nil, err
	}
	return s.db.Query(ctx, sql, args...)
}

func (s *scanCounter) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := s.explain(ctx, sql, args...); err != nil {
		return errRow{err}
	}
	return s.db.QueryRow(ctx, sql, args...)
}

func (s *scanCounter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return s.db.Exec(ctx, sql, args...)
}

func (s *scanCounter) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return s.db.CopyFrom(ctx, table, columns, src)
}

func (s *scanCounter) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return s.db.SendBatch(ctx, b)
}

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
