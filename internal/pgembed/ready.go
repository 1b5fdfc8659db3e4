package pgembed

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitReady polls until the server accepts a connection. Polling is the only
// signal PostgreSQL gives an outside process; the interval is short because a
// fresh cluster is ready in about 150 ms. It gives up early when the server
// process exits, with the end of its log as the reason.
func (c *Cluster) waitReady(ctx context.Context) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, c.SocketDSN("postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.exited:
			return fmt.Errorf("pgembed: postgres exited while starting: %s (log: %s)", c.logTail(), c.LogPath())
		case <-ctx.Done():
			return fmt.Errorf("pgembed: postgres not ready (%w; start timeout %v): %w (log: %s)", ctx.Err(), c.cfg.StartTimeout, err, c.LogPath())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// ensureDatabase creates the console's database on first start.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.SocketDSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgembed: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&exists); err != nil {
		return fmt.Errorf("pgembed: look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{Database}.Sanitize()); err != nil {
		return fmt.Errorf("pgembed: create database: %w", err)
	}
	return nil
}

func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return lastLines(string(b), 3)
}
