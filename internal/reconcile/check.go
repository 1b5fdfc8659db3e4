package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// Check is a check's configuration, as its row holds it.
type Check struct {
	ID          int64
	Name        string
	Kind        string
	BatchSize   int
	RemoteRate  float64 // remote calls per second
	Timeout     time.Duration
	Interval    time.Duration
	RemoteURL   string
	Destination string
	Topic       string
	Window      time.Duration
	// Table checks: the table, its key column and the compared columns.
	TableSchema, TableName, KeyColumn string
	Columns                           []string
	// LeaseVersion is the fencing token of the runner holding the check.
	LeaseVersion int64
}

func checkFromRow(r queries.SwitchyardReconcileCheck) Check {
	return Check{
		ID: r.ID, Name: r.Name, Kind: r.Kind, BatchSize: int(r.BatchSize), RemoteRate: r.RemoteRate,
		Timeout: time.Duration(r.TimeoutMs) * time.Millisecond, Interval: time.Duration(r.IntervalMs) * time.Millisecond,
		RemoteURL: r.RemoteUrl, Destination: r.Destination, Topic: r.Topic,
		Window:      time.Duration(r.WindowMs) * time.Millisecond,
		TableSchema: r.TableSchema, TableName: r.TableName, KeyColumn: r.KeyColumn, Columns: r.Columns,
		LeaseVersion: r.LeaseVersion,
	}
}

// Kind builds the source and remote of a check of one kind. An embedding
// program registers its own in Config.Kinds; client is the runner's HTTP
// client, for kinds that speak the documented contract.
type Kind func(ctx context.Context, pool *pgxpool.Pool, client *http.Client, c Check) (Source, Remote, error)

// builtinKinds are the kinds configured by rows alone.
var builtinKinds = map[string]Kind{
	KindDelivery: func(_ context.Context, pool *pgxpool.Pool, client *http.Client, c Check) (Source, Remote, error) {
		return deliverySource{pool: pool, destination: c.Destination}, NewHTTPRemote(client, c.RemoteURL), nil
	},
	KindTable: func(_ context.Context, pool *pgxpool.Pool, client *http.Client, c Check) (Source, Remote, error) {
		src, err := NewTableSource(pool, c.TableSchema, c.TableName, c.KeyColumn, c.Columns)
		if err != nil {
			return nil, nil, err
		}
		return src, NewHTTPRemote(client, c.RemoteURL), nil
	},
}

// identifierPattern is what a table check may name: a lower-case
// unquoted SQL identifier. Anything else is refused before it reaches SQL
// (it is quoted with pgx.Identifier all the same).
var identifierPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidIdentifier reports whether s may name a schema, table or column of
// a table check.
func ValidIdentifier(s string) bool { return identifierPattern.MatchString(s) }

// Validate reports the first reason c cannot run.
func (c Check) Validate(kinds map[string]Kind) error {
	if _, ok := kinds[c.Kind]; !ok {
		return fmt.Errorf("%w: %s: unknown kind %q", ErrInvalidCheck, c.Name, c.Kind)
	}
	if c.Kind == KindTable {
		if c.TableSchema != "" && !ValidIdentifier(c.TableSchema) {
			return fmt.Errorf("%w: %s: schema %q", ErrInvalidCheck, c.Name, c.TableSchema)
		}
		for _, id := range append([]string{c.TableName, c.KeyColumn}, c.Columns...) {
			if !ValidIdentifier(id) {
				return fmt.Errorf("%w: %s: identifier %q: want a lower-case SQL identifier", ErrInvalidCheck, c.Name, id)
			}
		}
	}
	return nil
}
