package registry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// A destination with several secret references signs every delivery with
// each: a receiver that knows only the old secret and one that knows only
// the new one both verify it, so the receiver can rotate without a gap.
// Its permanent_statuses column is its delivery policy: NULL retries
// 401/403/404, a list makes exactly those statuses permanent, and a
// change of the list is a change of the row (a new route).
func TestDestinationRowSecretsAndPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	const newSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	env := map[string]string{"OLD_SECRET": testSecret, "NEW_SECRET": newSecret}
	status := make(chan int, 1)
	got := make(chan http.Header, 1)
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		got <- r.Header.Clone()
		w.WriteHeader(<-status)
	}))
	t.Cleanup(srv.Close)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref, secret_refs)
		VALUES ('crm', 'webhook', $1, 'OLD_SECRET', '{NEW_SECRET}')`, srv.URL)
	require.NoError(t, err)
	set := New(pool, Config{Owner: "policy-test", Getenv: func(name string) string { return env[name] }})
	t.Cleanup(set.Close)

	deliver := func(code int) error {
		t.Helper()
		routes, _, err := set.Sync(ctx)
		require.NoError(t, err)
		status <- code
		_, err = routes["crm"].Destination.Deliver(ctx, destination.Delivery{MessageID: "msg_1", Topic: "t", Payload: []byte(`{"a":1}`), Attempt: 1})
		h := <-got
		for _, secret := range []string{testSecret, newSecret} {
			require.NoError(t, webhook.Verify(secret, h, body, time.Minute, time.Now()), "a receiver with either secret verifies")
		}
		return err
	}
	require.NoError(t, deliver(http.StatusNoContent))
	err = deliver(http.StatusUnauthorized)
	require.Error(t, err)
	require.False(t, destination.IsPermanent(err), "401 is retried by default")

	policy := func(list any) {
		t.Helper()
		_, err := pool.Exec(ctx, `UPDATE switchyard.destinations SET permanent_statuses = $1, updated_at = updated_at WHERE name = 'crm'`, list)
		require.NoError(t, err)
	}
	policy([]int32{401})
	require.True(t, destination.IsPermanent(deliver(http.StatusUnauthorized)), "a listed status is permanent")
	require.False(t, destination.IsPermanent(deliver(http.StatusBadRequest)), "an unlisted one is retried")
	policy([]int32{})
	require.False(t, destination.IsPermanent(deliver(http.StatusUnauthorized)), "'{}': nothing is permanent")
	policy(nil)
	require.True(t, destination.IsPermanent(deliver(http.StatusBadRequest)), "NULL: the default policy again")

	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_refs) VALUES ('bad-status', 'webhook', $1, '{NEW_SECRET}')`, srv.URL)
	require.NoError(t, err, "secret_refs alone is enough")
	_, err = pool.Exec(ctx, `UPDATE switchyard.destinations SET permanent_statuses = '{200}' WHERE name = 'crm'`)
	require.Error(t, err, "only 4xx and 5xx statuses may be listed")
}
