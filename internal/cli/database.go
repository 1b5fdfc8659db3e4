package cli

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/pgembed"
	"github.com/switchyard/switchyard/internal/postgres"
)

// database is the console's connection pool and, without DATABASE_URL, the
// embedded server behind it (internal/postgres opens both).
type database struct {
	pool    *pgxpool.Pool
	cluster *pgembed.Cluster // nil when DATABASE_URL is used
	db      *postgres.DB
}

// databaseConfig is where cfg says the database is.
func databaseConfig(cfg config) postgres.Config {
	return postgres.Config{
		URL: cfg.databaseURL, DataDir: cfg.dataDir, BinDir: cfg.pgBinDir, SearchRoots: cfg.pgSearchRoots,
		// Each dispatcher worker holds a connection while it claims and
		// another while it finalizes, besides the web handlers and the
		// listener. (Once the outbox has statistics, the dispatcher's
		// claims run on two connections of its own beside these:
		// internal/outbox's claimPool.)
		MaxConns: int32(max(8, 3*cfg.workers+4)),
	}
}

// openDatabase connects to DATABASE_URL, or starts the embedded server in
// the data directory and connects to it.
func openDatabase(ctx context.Context, cfg config, logger *slog.Logger) (*database, error) {
	db, err := postgres.Open(ctx, databaseConfig(cfg), logger)
	if err != nil {
		return nil, err
	}
	return &database{pool: db.Pool, cluster: db.Cluster, db: db}, nil
}

// Close closes the pool, then stops the embedded server if there is one.
func (db *database) Close() { db.db.Close() }
