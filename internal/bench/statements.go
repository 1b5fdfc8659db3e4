package bench

import (
	"cmp"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// serverStatementsShown is how many statements, the costliest by execution
// time, the bench reports.
const serverStatementsShown = 8

// serverStatement is one statement's share of the server's work over the
// measured phase, from pg_stat_statements: where the time goes, per
// statement, without a session of psql beside each run (issue 17 asks
// to measure before changing). Execution time includes waits for a CPU.
type serverStatement struct {
	Name       string  `json:"name"` // the sqlc query name, or the statement's start
	Calls      int64   `json:"calls"`
	Plans      int64   `json:"plans"`
	ExecMs     float64 `json:"exec_ms"`
	PlanMs     float64 `json:"plan_ms"`
	Buffers    int64   `json:"buffers"` // shared buffers hit or read
	WALRecords int64   `json:"wal_records"`
	WALBytes   int64   `json:"wal_bytes"`
}

// statementSample is pg_stat_statements' counters for one database, by
// queryid. nil: pg_stat_statements could not be read.
type statementSample map[int64]serverStatement

// sqlstates with which pg_stat_statements says it is not there: the
// extension not created in the database read (undefined_function), or its
// library not loaded (object_not_in_prerequisite_state).
const (
	sqlstateUndefinedFunction = "42883"
	sqlstateNotInPrereqState  = "55000"
)

// sampleStatements reads pg_stat_statements' counters for the statements
// run in database dbname, through pool, a connection to any database of
// the server where the extension was created (the bench's own database is
// new and has none; the configured one may), and their texts if withText
// (reading them is the costlier part, left out at the start of a measured
// phase, when the dispatcher is busy). Where the extension is missing or
// its library not loaded it returns nil and no error: the figures are a
// diagnostic, not the bench's result.
func sampleStatements(ctx context.Context, pool *pgxpool.Pool, dbname string, withText bool) (statementSample, error) {
	rows, err := pool.Query(ctx, `SELECT queryid, calls, plans, total_exec_time, total_plan_time,
			shared_blks_hit + shared_blks_read, wal_records, wal_bytes::bigint, coalesce(query, '')
		FROM pg_stat_statements($2)
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) AND queryid IS NOT NULL`, dbname, withText)
	if err != nil {
		return nil, statementsMissing(err)
	}
	defer rows.Close()
	s := statementSample{}
	for rows.Next() {
		var (
			id    int64
			st    serverStatement
			query string
		)
		if err := rows.Scan(&id, &st.Calls, &st.Plans, &st.ExecMs, &st.PlanMs, &st.Buffers, &st.WALRecords, &st.WALBytes, &query); err != nil {
			return nil, err
		}
		st.Name = statementName(query)
		prev := s[id] // one queryid under several roles: summed
		s[id] = addStatements(prev, st)
	}
	if err := rows.Err(); err != nil {
		return nil, statementsMissing(err)
	}
	return s, nil
}

// statementsMissing is nil for an error that says pg_stat_statements is
// not there, and err otherwise.
func statementsMissing(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == sqlstateUndefinedFunction || pgErr.Code == sqlstateNotInPrereqState) {
		return nil
	}
	return err
}

// sqlcName finds the name sqlc puts at the head of each of its queries.
var sqlcName = regexp.MustCompile(`^--\s*name:\s*(\w+)`)

// statementName is the sqlc query name of a statement, or its first 60
// characters, its white space collapsed.
func statementName(query string) string {
	query = strings.TrimSpace(query)
	if m := sqlcName.FindStringSubmatch(query); m != nil {
		return m[1]
	}
	name := strings.Join(strings.Fields(query), " ")
	if r := []rune(name); len(r) > 60 {
		name = string(r[:60])
	}
	return name
}

// addStatements is a's counters plus b's, under b's name when a has none.
func addStatements(a, b serverStatement) serverStatement {
	return serverStatement{
		Name:       cmp.Or(a.Name, b.Name),
		Calls:      a.Calls + b.Calls,
		Plans:      a.Plans + b.Plans,
		ExecMs:     a.ExecMs + b.ExecMs,
		PlanMs:     a.PlanMs + b.PlanMs,
		Buffers:    a.Buffers + b.Buffers,
		WALRecords: a.WALRecords + b.WALRecords,
		WALBytes:   a.WALBytes + b.WALBytes,
	}
}

// statementsSince is what each statement cost between two samples, those
// of one name together (one statement's text can have several queryids:
// pg_stat_statements gave the enqueue's first thousand calls of a run an
// entry of their own), the costliest by execution time first, at most
// serverStatementsShown. nil when either sample is.
func statementsSince(start, end statementSample) []serverStatement {
	if start == nil || end == nil {
		return nil
	}
	byName := map[string]serverStatement{}
	for id, e := range end {
		s := start[id]
		d := serverStatement{
			Name:       e.Name,
			Calls:      e.Calls - s.Calls,
			Plans:      e.Plans - s.Plans,
			ExecMs:     e.ExecMs - s.ExecMs,
			PlanMs:     e.PlanMs - s.PlanMs,
			Buffers:    e.Buffers - s.Buffers,
			WALRecords: e.WALRecords - s.WALRecords,
			WALBytes:   e.WALBytes - s.WALBytes,
		}
		if d.Calls <= 0 {
			continue
		}
		byName[d.Name] = addStatements(byName[d.Name], d)
	}
	out := make([]serverStatement, 0, len(byName))
	for _, st := range byName {
		st.ExecMs, st.PlanMs = benchRound(st.ExecMs, 1), benchRound(st.PlanMs, 1)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b serverStatement) int {
		return cmp.Or(cmp.Compare(b.ExecMs, a.ExecMs), strings.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), serverStatementsShown)]
}
