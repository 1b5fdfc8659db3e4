// Package pgtrace counts what a pgx pool sends to PostgreSQL, for the
// benches and the tests that prove how many round trips an operation
// takes.
package pgtrace

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips is a pgx QueryTracer and BatchTracer (a pool's
// ConnConfig.Tracer): it counts the statements sent on their own and the
// pipelines (pgx.Batch), each one round trip once its statements are
// prepared. Safe for concurrent use.
type RoundTrips struct{ statements, pipelines atomic.Int64 }

// Statements is how many statements were sent on their own.
func (r *RoundTrips) Statements() int64 { return r.statements.Load() }

// Pipelines is how many pipelines were sent.
func (r *RoundTrips) Pipelines() int64 { return r.pipelines.Load() }

// Total is statements and pipelines together: the round trips.
func (r *RoundTrips) Total() int64 { return r.Statements() + r.Pipelines() }

// Reset starts the counts again from zero.
func (r *RoundTrips) Reset() {
	r.statements.Store(0)
	r.pipelines.Store(0)
}

// TraceQueryStart counts a statement sent on its own.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.statements.Add(1)
	return ctx
}

// TraceQueryEnd does nothing: a statement is counted when it starts.
func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a pipeline, whatever it holds.
func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.pipelines.Add(1)
	return ctx
}

// TraceBatchQuery does nothing: a pipeline's statements share its round trip.
func (r *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (r *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
