package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/migrate"
)

// NewUnmanagedURL returns the URL of a fresh, migrated database for code
// that runs without a testing.TB: a package's runnable examples, which
// TestMain (MainWith's setup) gives one database to share. drop removes
// it; whatever connected to it must have disconnected.
func NewUnmanagedURL(ctx context.Context) (url string, drop func() error, err error) {
	if server == nil {
		return "", nil, errors.New("dbtest: no server: call from MainWith's setup")
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "switchyard_unmanaged_" + hex.EncodeToString(suffix)
	admin, err := pgx.Connect(ctx, server.URL())
	if err != nil {
		return "", nil, fmt.Errorf("dbtest: connect to server: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("dbtest: create database: %w", err)
	}
	conf := *server
	conf.Database = name
	drop = func() error {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, server.URL())
		if err != nil {
			return fmt.Errorf("dbtest: connect to server: %w", err)
		}
		defer admin.Close(ctx)
		_, err = admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		return err
	}
	if err := migrateURL(ctx, conf.URL()); err != nil {
		return "", nil, errors.Join(err, drop())
	}
	return conf.URL(), drop, nil
}

func migrateURL(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("dbtest: connect: %w", err)
	}
	defer pool.Close()
	m, err := migrate.New(pool, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}
