package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
)

// A session that sends expensive list requests faster than its bucket
// refills is answered 429 with a Retry-After it can trust; another
// session is not slowed by it.
func TestExpensiveListsAreThrottledPerSession(t *testing.T) {
	t.Parallel()
	// A token an hour: the bucket does not refill while the test runs,
	// however slow the machine.
	b := setupAccessLogged(t, slog.New(slog.DiscardHandler), false, nil, nil, nil, func(d *console.Deps) {
		d.ListRate, d.ListBurst = rate.Every(time.Hour), 3
	})
	greedy, other := b.login(t, auth.Admin), b.login(t, auth.Admin)
	for i := range 3 {
		rec := b.request(http.MethodGet, "/messages?error=timeout", greedy, nil)
		require.Equal(t, http.StatusOK, rec.Code, "request %d of the burst", i)
	}
	for _, path := range []string{"/messages?error=timeout", "/audit?actor=x", "/inbox"} {
		rec := b.request(http.MethodGet, path, greedy, nil)
		require.Equal(t, http.StatusTooManyRequests, rec.Code, path)
		secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
		require.NoError(t, err, path)
		require.InDelta(t, 3600, secs, 60, "%s: the next token is an hour away", path)
	}
	require.Equal(t, http.StatusOK, b.request(http.MethodGet, "/messages?error=timeout", other, nil).Code)
	require.Equal(t, http.StatusOK, b.request(http.MethodGet, "/messages/new?above=1", greedy, nil).Code, "cheap requests are not throttled")
}

// The error filter searches the start of each error text (its first 512
// characters), which bounds what a page may cost whatever the errors hold.
func TestErrorFilterSearchesTheStartOfTheError(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('d', 'function')`)
	require.NoError(t, err)
	for _, e := range []string{"needle-early " + strings.Repeat("x", 1000), strings.Repeat("x", 600) + " needle-late"} {
		_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, last_error)
			VALUES ('t', 'd', '{}', 'dead', $1)`, e)
		require.NoError(t, err)
	}
	admin := b.login(t, auth.Admin)
	count := func(q string) int {
		rec := b.request(http.MethodGet, "/messages?error="+q, admin, nil)
		require.Equal(t, http.StatusOK, rec.Code, q)
		return strings.Count(rec.Body.String(), `data-testid="message-row"`)
	}
	require.Equal(t, 1, count("needle-early"))
	require.Equal(t, 0, count("needle-late"), "past the searched start")
	rec := b.request(http.MethodGet, "/messages?error="+strings.Repeat("y", 201), admin, nil)
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "a filter has a maximum")
	require.Contains(t, rec.Body.String(), "error is too long")
}
