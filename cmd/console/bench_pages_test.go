package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestBenchPagesRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"pages", "--rows", "10"},
		{"pages", "--dead", "900000"},
		{"pages", "--requests", "0"},
		{"pages", "--fingerprints", "0"},
		{"pages", "extra"},
	} {
		cfg, err := parseConfig([]string{"bench", "--database-url", "postgres://127.0.0.1:1/none"}, func(string) string { return "" }, io.Discard)
		require.NoError(t, err)
		err = benchCommand(context.Background(), cfg, args, slog.New(slog.DiscardHandler), io.Discard)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
}

func TestBenchPagesHelp(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig([]string{"bench"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, benchCommand(context.Background(), cfg, []string{"pages", "-h"}, slog.New(slog.DiscardHandler), &out))
	require.Contains(t, out.String(), "-rows")
	require.Contains(t, out.String(), "-explain")
}

// Seeding a million rows in place would leave them in someone's database:
// without CREATEDB the bench refuses, and writes nothing.
func TestBenchPagesRefusesInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg, err := parseConfig([]string{"bench", "--database-url", url}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	err = benchCommand(context.Background(), cfg, []string{"pages", "--rows", "1000"}, slog.New(slog.DiscardHandler), io.Discard)
	require.ErrorContains(t, err, "CREATEDB")
}
