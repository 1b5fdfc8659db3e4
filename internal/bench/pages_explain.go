package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
)

// explainRecorder collects the plans auto_explain sends as notices.
type explainRecorder struct {
	mu    sync.Mutex
	plans []string // guarded by mu
}

func (r *explainRecorder) notice(_ *pgconn.PgConn, n *pgconn.Notice) {
	if !strings.Contains(n.Message, "Query Text:") {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plans = append(r.plans, n.Message)
}

func (r *explainRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.plans
	r.plans = nil
	return p
}

// explainPool connects to the bench database with auto_explain logging
// every statement's actual plan (EXPLAIN ANALYZE, BUFFERS) to the client
// as a notice. LOAD needs a superuser, which the embedded server's role is.
func explainPool(ctx context.Context, base *pgxpool.Config, rec *explainRecorder) (*pgxpool.Pool, error) {
	cfg := base.Copy()
	cfg.MaxConns = 1
	cfg.ConnConfig.OnNotice = rec.notice
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, s := range []string{
			"LOAD 'auto_explain'",
			"SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_analyze = on",
			"SET auto_explain.log_buffers = on",
			"SET auto_explain.log_timing = on",
			"SET auto_explain.log_nested_statements = on",
			"SET auto_explain.log_level = notice",
		} {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect with auto_explain: %w", err)
	}
	return pool, nil
}

// writeExplain requests every page once more (warm) through a pool that
// explains its statements, and writes each page's plans to path as
// Markdown.
func writeExplain(ctx context.Context, path string, e *echo.Echo, pages map[string]string, rec *explainRecorder, rows int) error {
	names := make([]string, 0, len(pages))
	for name := range pages {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "Plans captured by `console bench pages --rows %d --explain` (auto_explain, ANALYZE and BUFFERS, on a warm cache; generic plans after the warm-up, as the console runs them).\n\n", rows)
	for _, name := range names {
		for range pagesBenchWarmup {
			benchRequest1(e, pages[name])
		}
		rec.take()
		benchRequest1(e, pages[name])
		fmt.Fprintf(&b, "### %s: `GET %s`\n\n", name, pages[name])
		for _, plan := range rec.take() {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", strings.TrimSpace(plan))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write the plans: %w", err)
	}
	return nil
}
