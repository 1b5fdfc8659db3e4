// Package pgwarm opens a pool's connections before they are needed. A
// connection made on demand delays the statement that asked for it (a
// server process started, its catalog caches empty) and, on a small
// machine, takes CPU from the statements already running.
package pgwarm

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open makes sure pool holds at least n connections (at most its
// MaxConns), opening those it lacks together, and leaves them idle in the
// pool. It waits until they are open or ctx ends, and reports the first
// failure; the connections opened are kept either way.
func Open(ctx context.Context, pool *pgxpool.Pool, n int) error {
	n = min(n, int(pool.Config().MaxConns))
	if int(pool.Stat().TotalConns()) >= n {
		return nil
	}
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
			failed = err
		}
	}
	return failed
}
