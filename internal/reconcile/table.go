package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TableSource walks a local table by its key column: the one place where
// runtime SQL is not sqlc's, because the table, key and columns are named
// by a check's row. That is safe because every identifier is checked
// against ValidIdentifier and quoted with pgx.Identifier, and every value
// is a bind parameter. The key column should be unique and indexed (its
// primary key): the keyset scan orders and seeks by it.
//
// Cursors and keys are the key's text (key::text); bind parameters are
// compared with the column in its own type, so an integer key is walked
// in numeric order. The compared columns are read as JSON values
// (to_jsonb), which is what the remote's fields are compared with.
type TableSource struct {
	pool *pgxpool.Pool
	// sorted lists the compared columns' indexes in name order; prefix[i]
	// is `"name":` of column i.
	sorted []int
	prefix []string
	// The statements, built once from checked identifiers.
	bounds, first, next, exists, current string
}

// NewTableSource returns the source of a table check, or an error wrapping
// ErrInvalidCheck when an identifier is not a plain lower-case one.
func NewTableSource(pool *pgxpool.Pool, schema, table, key string, columns []string) (*TableSource, error) {
	for _, id := range append([]string{table, key}, columns...) {
		if !ValidIdentifier(id) {
			return nil, fmt.Errorf("%w: identifier %q", ErrInvalidCheck, id)
		}
	}
	if schema != "" && !ValidIdentifier(schema) {
		return nil, fmt.Errorf("%w: schema %q", ErrInvalidCheck, schema)
	}
	if len(columns) == 0 {
		return nil, fmt.Errorf("%w: a table check compares at least one column", ErrInvalidCheck)
	}
	name := pgx.Identifier{table}
	if schema != "" {
		name = pgx.Identifier{schema, table}
	}
	tbl, k := name.Sanitize(), pgx.Identifier{key}.Sanitize()
	pairs := make([]string, len(columns))
	values := make([]string, len(columns))
	for i, c := range columns {
		pairs[i] = fmt.Sprintf("'%s', to_jsonb(t.%s)", c, pgx.Identifier{c}.Sanitize()) // c matched identifierPattern: no quote inside
		values[i] = fmt.Sprintf("coalesce(to_jsonb(t.%s)::text, 'null')", pgx.Identifier{c}.Sanitize())
	}
	// A page reads each compared column as the text of its JSON value:
	// compared as bytes with the remote's (decoded only when they differ),
	// which costs far less than decoding a JSON object per row.
	sorted, prefix := make([]int, len(columns)), make([]string, len(columns))
	for i, c := range columns {
		sorted[i], prefix[i] = i, `"`+c+`":` // an identifier needs no escaping
	}
	slices.SortFunc(sorted, func(a, b int) int { return cmp.Compare(columns[a], columns[b]) })
	return &TableSource{
		pool: pool, sorted: sorted, prefix: prefix,
		bounds: fmt.Sprintf("SELECT count(*), max(t.%[2]s)::text FROM %[1]s t", tbl, k),
		first: fmt.Sprintf(`SELECT t.%[2]s::text, %[3]s FROM %[1]s t
WHERE t.%[2]s <= $1 ORDER BY t.%[2]s LIMIT $2`, tbl, k, strings.Join(values, ", ")),
		next: fmt.Sprintf(`SELECT t.%[2]s::text, %[3]s FROM %[1]s t
WHERE t.%[2]s > $1 AND t.%[2]s <= $2 ORDER BY t.%[2]s LIMIT $3`, tbl, k, strings.Join(values, ", ")),
		exists: fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %[1]s t WHERE t.%[2]s = $1)", tbl, k),
		current: fmt.Sprintf("SELECT jsonb_build_object(%[3]s) FROM %[1]s t WHERE t.%[2]s = $1",
			tbl, k, strings.Join(pairs, ", ")),
	}, nil
}

// Bounds implements Source: the table's highest key and row count.
func (s *TableSource) Bounds(ctx context.Context, _ time.Time) (*string, int64, error) {
	var n int64
	var upper *string
	if err := s.pool.QueryRow(ctx, s.bounds).Scan(&n, &upper); err != nil {
		return nil, 0, fmt.Errorf("reconcile: table bounds: %w", err)
	}
	return upper, n, nil
}

// Page implements Source.
func (s *TableSource) Page(ctx context.Context, _ time.Time, after *string, upper string, limit int) ([]Item, error) {
	// The key's text is bound where the column's type is expected:
	// PostgreSQL parses it as that type (pgx sends a string as text).
	var rows pgx.Rows
	var err error
	if after == nil {
		rows, err = s.pool.Query(ctx, s.first, upper, limit)
	} else {
		rows, err = s.pool.Query(ctx, s.next, *after, upper, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("reconcile: table page: %w", err)
	}
	defer rows.Close()
	items := make([]Item, 0, limit)
	for rows.Next() {
		items = append(items, s.item(rows.RawValues()))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconcile: table page: %w", err)
	}
	return items, nil
}

// item copies a page's row into an Item: the key's text, and the
// compared columns as one JSON object written as Go's encoding/json
// writes one (keys sorted, no spaces), so that a remote speaking Go's
// JSON answers the same bytes for an entity in sync.
func (s *TableSource) item(vals [][]byte) Item {
	n := len(vals[0]) + 2
	for _, c := range s.sorted {
		n += len(s.prefix[c]) + len(vals[c+1])
	}
	raw := make([]byte, 0, n)
	for i, c := range s.sorted {
		if i == 0 {
			raw = append(raw, '{')
		} else {
			raw = append(raw, ',')
		}
		raw = append(append(raw, s.prefix[c]...), vals[c+1]...)
	}
	raw = append(raw, '}')
	key := string(vals[0])
	return Item{Cursor: key, Key: key, RawFields: raw}
}

// sqlstateInvalidText is invalid_text_representation: a remote key that
// is not even a value of the key column's type.
const sqlstateInvalidText = "22P02"

// Exists implements Ranged. A key that is not a value of the key column's
// type does not exist locally.
func (s *TableSource) Exists(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, s.exists, key).Scan(&ok)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateInvalidText {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reconcile: does key %q exist: %w", key, err)
	}
	return ok, nil
}

// Current returns the compared columns of the row key as a JSON object,
// read in tx (a repair's transaction, so that what is enqueued is what
// the row holds when the repair commits); found is false when the row is
// gone.
func (s *TableSource) Current(ctx context.Context, tx pgx.Tx, key string) (fields []byte, found bool, err error) {
	err = tx.QueryRow(ctx, s.current, key).Scan(&fields)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reconcile: current row %q: %w", key, err)
	}
	return fields, true, nil
}
