package registry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

// TestReloadRereadsNowAndDisabledGetsNoRoute: with an interval far longer
// than the test, Reload makes Watch reread at once; a destination
// disabled is dropped from the routes (its messages wait), and enabled
// again it is routed again.
func TestReloadRereadsNowAndDisabledGetsNoRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	r := New(pool, Config{Interval: time.Hour, Getenv: func(string) string { return testSecret }})
	t.Cleanup(r.Close)
	var mu sync.Mutex
	var routes map[string]outbox.Route
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		r.Watch(wctx, func(next map[string]outbox.Route) { mu.Lock(); routes = next; mu.Unlock() })
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	routed := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := routes[name]
		return ok
	}

	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref) VALUES ('crm', 'webhook', 'https://crm.example/hooks', 'S')`)
	require.NoError(t, err)
	r.Reload()
	testwait.Until(t, 5*time.Second, "the added destination routed after Reload", func() bool { return routed("crm") })

	_, err = pool.Exec(ctx, `UPDATE switchyard.destinations SET disabled = true, updated_at = now() WHERE name = 'crm'`)
	require.NoError(t, err)
	r.Reload()
	testwait.Until(t, 5*time.Second, "the disabled destination dropped", func() bool { return !routed("crm") })

	_, err = pool.Exec(ctx, `UPDATE switchyard.destinations SET disabled = false, updated_at = now() WHERE name = 'crm'`)
	require.NoError(t, err)
	r.Reload()
	testwait.Until(t, 5*time.Second, "the enabled destination routed again", func() bool { return routed("crm") })
}
