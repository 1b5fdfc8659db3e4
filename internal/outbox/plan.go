package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/queries"
)

// customPlans sends every statement run through its Exec, Query and
// QueryRow to be planned for its own arguments (CopyFrom and SendBatch go
// through as they are).
//
// pgx prepares and caches each statement, and after five executions
// PostgreSQL may keep a prepared statement's generic plan, made without
// its arguments: it takes an array argument to hold ten elements. The
// finalize unnests arrays of up to 1,000 messages and names their ids;
// with a million delivered messages retained beside a backlog, its
// generic plan expected one message to update and joined the input to it
// by rescanning the whole input for every message (530 of a 1,024-message
// finalize's 560 ms; the drain ran at a fifth of its rate on an empty
// outbox).
// pgx.QueryExecModeCacheDescribe sends the statement unnamed, which
// PostgreSQL plans anew with the arguments; it still takes one round
// trip, since pgx caches the statement's description. Planning costs
// about 2 ms per statement, so a small finalize stays a prepared statement
// (genericPlanMost).
type customPlans struct{ queries.DBTX }

func (c customPlans) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.DBTX.Exec(ctx, sql, withCustomPlan(args)...)
}

func (c customPlans) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.DBTX.Query(ctx, sql, withCustomPlan(args)...)
}

func (c customPlans) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.DBTX.QueryRow(ctx, sql, withCustomPlan(args)...)
}

func withCustomPlan(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}
