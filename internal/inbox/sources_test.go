package inbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A running receiver follows switchyard.inbox_sources within its reload
// interval, without a restart: a source added there is accepted, a new
// list of secrets verifies with the new secret and refuses the old one, a
// changed handler is used, and a removed source is unknown again.
func TestReceiverReloadsSources(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	secrets := map[string]string{"SECRET_OLD": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "SECRET_NEW": "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}
	reloaded := make(chan struct{}, 1)
	r := NewReceiver(ReceiverConfig{
		Pool: pool, Getenv: func(name string) string { return secrets[name] },
		Handlers: Registry{
			"effect": {Handle: writeEffect},
			"refuse": {Handle: func(context.Context, pgx.Tx, Event) error { return fmt.Errorf("refused") }},
		},
		ReloadInterval: 20 * time.Millisecond,
		Reloaded: func() {
			select {
			case reloaded <- struct{}{}:
			default:
			}
		},
	})
	require.NoError(t, r.Load(ctx))
	<-reloaded // the first load
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Watch(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	n := 0
	accept := func(secret string) (Result, error) {
		n++
		id := fmt.Sprintf("evt_%d", n)
		body := []byte(`{"n": 1}`)
		return r.Accept(context.Background(), "crm", standardHeader(t, id, time.Now().Unix(), []string{secret}, body), body)
	}
	change := func(stmt string) {
		t.Helper()
		_, err := pool.Exec(context.Background(), stmt)
		require.NoError(t, err)
		select {
		case <-reloaded:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver did not reload after: %s", stmt)
		}
	}

	_, err := accept(secrets["SECRET_OLD"])
	require.ErrorIs(t, err, ErrUnknownSource, "no such source yet")

	change(`INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler) VALUES ('crm', 'standard-webhooks', '{SECRET_OLD}', 'effect')`)
	res, err := accept(secrets["SECRET_OLD"])
	require.NoError(t, err, "an added source is accepted")
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))

	change(`UPDATE switchyard.inbox_sources SET secret_refs = '{SECRET_NEW}', updated_at = now() WHERE name = 'crm'`)
	_, err = accept(secrets["SECRET_OLD"])
	require.ErrorIs(t, err, ErrSignature, "the retired secret no longer verifies")
	_, err = accept(secrets["SECRET_NEW"])
	require.NoError(t, err, "the new secret verifies")
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects`))

	change(`UPDATE switchyard.inbox_sources SET handler = 'refuse', updated_at = now() WHERE name = 'crm'`)
	_, err = accept(secrets["SECRET_NEW"])
	require.ErrorIs(t, err, ErrHandler, "the changed handler runs")
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects`))

	change(`DELETE FROM switchyard.inbox_sources WHERE name = 'crm'`)
	_, err = accept(secrets["SECRET_NEW"])
	require.ErrorIs(t, err, ErrUnknownSource, "a removed source is unknown")
}
