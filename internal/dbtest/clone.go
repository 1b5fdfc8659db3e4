package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/peterldowns/pgtestdb"
)

// cloner gives each test a database cloned from the migrated template.
//
// The first test of a binary gets its database from pgtestdb, which
// creates the role and the template (once for the whole server, whatever
// the number of test binaries) and drops that database after the test.
// Every later test's database is cloned and dropped here, over a pool of
// admin connections kept for the run: pgtestdb opens a new connection to
// the server for each clone and another for each drop, and a PostgreSQL
// backend costs the server about 45 ms of CPU to start and stop on a
// 2-core CI machine. Twice per test, that was 8-50% of the shared test
// server's CPU per package (43% in internal/console). The clone is the
// same: CREATE DATABASE from pgtestdb's template, owned by pgtestdb's
// role, named as pgtestdb names it, dropped unless the test failed.
type cloner struct {
	mu       sync.Mutex
	template string          // the template database; empty until the first test
	instance pgtestdb.Config // the first test's database: its role and server
	admin    *pgxpool.Pool   // admin connections to the server's database
}

// newURL returns the URL of a fresh clone of the template for t.
func (c *cloner) newURL(t testing.TB) string {
	t.Helper()
	c.mu.Lock()
	if c.template == "" {
		defer c.mu.Unlock() // the others wait for the template
		conf := pgtestdb.Custom(t, *server, migrator{})
		template, _, ok := strings.Cut(conf.Database, "_inst_")
		if !ok {
			t.Fatalf("dbtest: pgtestdb named its database %q: no template name in it", conf.Database)
		}
		admin, err := pgxpool.New(context.Background(), server.URL())
		if err != nil {
			t.Fatalf("dbtest: open the admin pool: %v", err)
		}
		c.template, c.instance, c.admin = template, *conf, admin
		return conf.URL()
	}
	c.mu.Unlock()
	return c.clone(t)
}

func (c *cloner) clone(t testing.TB) string {
	t.Helper()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	conf := c.instance
	conf.Database = c.template + "_inst_" + hex.EncodeToString(suffix)
	ctx := context.Background()
	_, err := c.admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s WITH TEMPLATE %s OWNER %s",
		pgx.Identifier{conf.Database}.Sanitize(), pgx.Identifier{c.template}.Sanitize(), pgx.Identifier{conf.User}.Sanitize()))
	if err != nil {
		t.Fatalf("dbtest: clone the template %s: %v", c.template, err)
	}
	t.Logf("testdbconf: %s", conf.URL())
	t.Cleanup(func() {
		if t.Failed() {
			return // kept for inspection; its URL is in the log
		}
		if _, err := c.admin.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{conf.Database}.Sanitize()); err != nil {
			t.Fatalf("dbtest: drop the test database %s (still connected?): %v", conf.Database, err)
		}
	})
	return conf.URL()
}

// close closes the admin pool, if any test opened it.
func (c *cloner) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin != nil {
		c.admin.Close()
		c.admin = nil
	}
}
