package console

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// ErrMigrationsPending means the database lacks migrations this binary has.
var ErrMigrationsPending = errors.New("console: database migrations pending")

// MigrationState reports whether every known migration is applied.
type MigrationState interface {
	Current(ctx context.Context) (bool, error)
}

// DatabaseReadiness is /readyz's check: the database answers and every
// migration this binary knows is applied.
type DatabaseReadiness struct {
	Pool       *pgxpool.Pool
	Migrations MigrationState
}

// Ready implements Readiness.
func (r DatabaseReadiness) Ready(ctx context.Context) error {
	if _, err := queries.New(r.Pool).ServerVersionNumGet(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	current, err := r.Migrations.Current(ctx)
	if err != nil {
		return err
	}
	if !current {
		return ErrMigrationsPending
	}
	return nil
}
