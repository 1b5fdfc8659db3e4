// Package pgwarm opens a pool's connections before they are needed. A
// connection made on demand delays the statement that asked for it (a
// server process started, its catalog caches empty) and, on a small
// machine, takes CPU from the statements already running.
package pgwarm

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open acquires n of pool's connections together, which opens those the
// pool has not got idle, and gives them back: the pool then holds at
// least n. It takes no more than the pool has room for beside the
// connections in use when it is called, so that it never waits for one
// of those; it waits for the rest until ctx ends, and reports the first
// failure. The connections it opened are kept either way.
func Open(ctx context.Context, pool *pgxpool.Pool, n int) error {
	stat := pool.Stat()
	if int(stat.TotalConns()) >= n {
		return nil
	}
	n = min(n, int(stat.MaxConns()-stat.AcquiredConns()))
	conns := make(chan *pgxpool.Conn, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			// Each is held until all are acquired, so that each is a
			// connection of its own.
			c, err := pool.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			conns <- c
		}()
	}
	var failed error
	for range n {
		select {
		case c := <-conns:
			defer c.Release()
		case err := <-errs:
			if failed == nil {
				failed = err
			}
		}
	}
	return failed
}
