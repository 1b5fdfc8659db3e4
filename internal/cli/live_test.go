package cli

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// console serve streams committed changes on /events, and an open stream
// does not hold up a clean shutdown: the hub closes before HTTP drains.
func TestServeStreamsChangesAndShutsDownWithAStreamOpen(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	p := serveConsole(t, []string{"DATABASE_URL=" + url, "SWITCHYARD_WORKERS=0"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/events", nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	waitLine(t, lines, "event: ready")

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindBreaker, Subject: "orders"})
	}))
	require.NoError(t, changefeed.Notify(ctx, pool))
	waitLine(t, lines, "event: breaker")

	start := time.Now()
	p.Stop(t)
	require.Less(t, time.Since(start), 8*time.Second, "the open stream must not wait for the 10s shutdown timeout")
	for range lines { // the stream ended with the process
	}
}

func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "stream ended before %q", want)
			if line == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within 10s", want)
		}
	}
}
