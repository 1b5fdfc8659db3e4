package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// The same event sent to two console processes on one database, 50 times
// at once: the customer-upsert handler's effect happens once.
func TestInboxSameEventToTwoInstancesAppliesOnce(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	url := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler)
		VALUES ('crm', 'standard-webhooks', '{CRM_INBOX_SECRET}', 'customer-upsert')`)
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + url, "CRM_INBOX_SECRET=" + secret}
	instances := []string{
		serveConsole(t, env, "--workers", "0").URL,
		serveConsole(t, env, "--workers", "0").URL,
	}

	body := []byte(`{"customer": {"id": "cus_42", "name": "Ada"}, "version": 1}`)
	now := time.Now()
	sig, err := webhook.Sign(secret, "evt_42", now, body)
	require.NoError(t, err)
	const n = 50
	start := make(chan struct{})
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			codes <- postSigned(t, instances[i%2]+"/inbox/crm", "evt_42", now, sig, body)
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	for code := range codes {
		require.Equal(t, http.StatusOK, code)
	}
	count := func(query string) int {
		var c int
		require.NoError(t, pool.QueryRow(ctx, query).Scan(&c))
		return c
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM switchyard.demo_customers WHERE external_id = 'cus_42'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM switchyard.inbox_events WHERE status = 'processed'`))
	require.Equal(t, n-1, count(`SELECT sum(count) FROM switchyard.inbox_duplicates WHERE source = 'crm'`))

	code, metrics := get(t, instances[0]+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, `switchyard_inbox_received_total{source="crm"}`)
}

func postSigned(t *testing.T, url, id string, ts time.Time, sig string, body []byte) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Close = true
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}
