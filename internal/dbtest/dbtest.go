// Package dbtest gives every test that touches data its own PostgreSQL
// database, cloned in about 150 ms from a template migrated once.
//
// A test binary's TestMain calls Main. If TEST_DATABASE_URL is set (make test
// sets it to one private cluster for the whole run), databases are created on
// that server; otherwise Main starts a private throwaway cluster for this test
// binary and stops it at the end. Either way the real PostgreSQL server
// binaries run: never a mock. The database of a passing test is dropped; that
// of a failing test is kept and its URL is in the test log.
package dbtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver pgtestdb uses
	"github.com/peterldowns/pgtestdb"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/migrations"
)

// EnvURL names the variable holding a server URL to create test databases
// on. The role in it must be allowed to create roles and databases.
const EnvURL = "TEST_DATABASE_URL"

// server is the connection to the server that holds the test databases. It is
// set once by Main before any test runs and only read afterwards.
var server *pgtestdb.Config

// clones makes every test's database after the first from the template
// over one pool of admin connections kept for the whole test binary.
var clones cloner

// Main runs the tests of one package against a PostgreSQL server and exits.
// It checks for leaked goroutines after a passing run.
func Main(m *testing.M) {
	MainWith(m, nil)
}

// MainWith is Main with package-wide setup: setup runs once the server is
// known and before any test; the teardown it returns runs after the tests and
// before the leak check. A setup error fails the run.
func MainWith(m *testing.M, setup func() (teardown func(), err error)) {
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup func() (func(), error)) int {
	url := os.Getenv(EnvURL)
	var cluster *Cluster
	if url == "" {
		var err error
		if cluster, err = StartCluster(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "dbtest:", err)
			return 1
		}
		url = cluster.URL
	}
	conf, err := configFromURL(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		return 1
	}
	server = conf
	code := runTests(m, setup)
	clones.close() // before the leak check: the pool owns goroutines
	if cluster != nil {
		cluster.KeepIf(code != 0)
		cluster.Stop() // before the leak check: it owns a goroutine
	}
	return leakCheck(code)
}

func runTests(m *testing.M, setup func() (func(), error)) int {
	if setup != nil {
		teardown, err := setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, "dbtest: setup:", err)
			return 1
		}
		defer teardown()
	}
	return m.Run()
}

func leakCheck(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "dbtest: goroutines leaked:", err)
		return 1
	}
	return 0
}

// New returns a pool on a fresh, migrated database of the test's own. The
// pool is closed and the database dropped when the test ends, unless it
// failed.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), NewURL(t))
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewURL returns the URL of a fresh, migrated database of the test's own, for
// tests that start a server process on it. Whatever connects to it must
// disconnect before the test ends, or dropping it fails the test.
func NewURL(t testing.TB) string {
	t.Helper()
	if server == nil {
		t.Fatalf("dbtest: no server: call dbtest.Main(m) from TestMain")
	}
	return clones.newURL(t)
}

func configFromURL(url string) (*pgtestdb.Config, error) {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", EnvURL, err)
	}
	return &pgtestdb.Config{
		DriverName: "pgx",
		Host:       pc.Host,
		Port:       strconv.Itoa(int(pc.Port)),
		User:       pc.User,
		Password:   pc.Password,
		Database:   pc.Database,
		Options:    "sslmode=disable",
	}, nil
}

// migrator builds the template database with the console's own migrations.
// Its hash covers every migration file, so changing one makes a new template.
type migrator struct{}

func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("dbtest: hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (migrator) Migrate(ctx context.Context, _ *sql.DB, conf pgtestdb.Config) error {
	pool, err := pgxpool.New(ctx, conf.URL())
	if err != nil {
		return fmt.Errorf("dbtest: connect to template: %w", err)
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
