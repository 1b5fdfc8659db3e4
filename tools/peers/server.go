package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// envUnderWithpg marks the second run of peers, the one withpg started:
// only then is TEST_DATABASE_URL a cluster of our own, which we may
// reconfigure. (Inside `make test`, TEST_DATABASE_URL is someone else's.)
const envUnderWithpg = "SWITCHYARD_PEERS_UNDER_WITHPG"

// reexecUnderWithpg builds the test harness's withpg from the main module
// and runs this same command under it, with a throwaway cluster of its own
// that keeps PostgreSQL's stock durability (dbtest.StartDurableCluster).
func reexecUnderWithpg(ctx context.Context, repo, tmp string, args []string) error {
	withpg := filepath.Join(tmp, "withpg")
	if err := goBuild(ctx, repo, withpg, "./internal/dbtest/withpg"); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "peers: DATABASE_URL is not set: starting a throwaway cluster with internal/dbtest/withpg -durable")
	cmd := exec.CommandContext(ctx, withpg, append([]string{"-durable", self, "--repo", repo}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEST_DATABASE_URL=") { // withpg would reuse it
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, envUnderWithpg+"=1")
	return cmd.Run()
}

// goBuild builds pkg of the main module at repo into out.
func goBuild(ctx context.Context, repo, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// findRepo walks up from the working directory to Switchyard's go.mod.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/switchyard/switchyard\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the Switchyard repository: pass --repo")
		}
		dir = parent
	}
}

// settings are what the server reports that decides what a commit costs.
type settings struct {
	ServerVersion     string `json:"server_version"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	FullPageWrites    string `json:"full_page_writes"`
	SharedBuffers     string `json:"shared_buffers"`
	WalSyncMethod     string `json:"wal_sync_method"`
	MaxConnections    string `json:"max_connections"`
	CommitDelay       string `json:"commit_delay"`
	CommitSiblings    string `json:"commit_siblings"`
}

func readSettings(ctx context.Context, pool *pgxpool.Pool) (settings, error) {
	var s settings
	err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('shared_buffers'), current_setting('wal_sync_method'), current_setting('max_connections'),
		current_setting('commit_delay'), current_setting('commit_siblings')`).
		Scan(&s.ServerVersion, &s.Fsync, &s.SynchronousCommit, &s.FullPageWrites, &s.SharedBuffers, &s.WalSyncMethod,
			&s.MaxConnections, &s.CommitDelay, &s.CommitSiblings)
	if err != nil {
		return s, fmt.Errorf("read server settings: %w", err)
	}
	s.ServerVersion, _, _ = strings.Cut(s.ServerVersion, " ")
	return s, nil
}

// connect opens a pool of at most conns connections.
func connect(ctx context.Context, dsn string, conns int32) (*pgxpool.Pool, error) {
	conf, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	conf.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// withDatabase is dsn with its database replaced by name; dsn is a
// postgres:// URL or a keyword/value string (where a repeated keyword wins).
func withDatabase(dsn, name string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " dbname=" + name, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse the database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// openConns opens n of pool's connections and leaves them idle: the
// enqueuers' connections, open before the timed phase, as Switchyard's
// bench opens its own (internal/pgwarm in the console's module).
func openConns(ctx context.Context, pool *pgxpool.Pool, n int) error {
	n = min(n, int(pool.Stat().MaxConns()))
	held := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		held = append(held, c)
	}
	return nil
}
