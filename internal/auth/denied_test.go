package auth

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// A session's refusals are recorded once per interval: the first at once,
// the ones after it counted, and reported by the next recorded one.
func TestRefusalsAreRecordedOncePerInterval(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{DeniedAuditInterval: time.Hour})
	ctx := context.Background()
	sess, err := svc.Login(ctx, "bob", goodPassword, "192.0.2.40")
	require.NoError(t, err)
	d := Denial{Target: "POST /messages/7/actions/replay", Route: "/messages/:id/actions/replay", Need: Operator, RemoteAddr: "192.0.2.40"}

	for i := range 4 {
		recorded, err := svc.RecordDenied(ctx, sess.Principal, d)
		require.NoError(t, err)
		require.Equal(t, i == 0, recorded, "refusal %d", i)
	}
	denied := func() int {
		return count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'access.denied' AND outcome = 'denied' AND actor = 'bob'`)
	}
	require.Equal(t, 1, denied())

	// The interval has passed: the next refusal is recorded, with the
	// three that were not.
	_, err = pool.Exec(ctx, `UPDATE switchyard.sessions SET denied_audited_at = now() - interval '2 hours' WHERE id = $1`, sess.Principal.SessionID)
	require.NoError(t, err)
	recorded, err := svc.RecordDenied(ctx, sess.Principal, d)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, 2, denied())
	var detail map[string]any
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT detail FROM switchyard.audit_log WHERE action = 'access.denied' ORDER BY id DESC LIMIT 1`).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &detail))
	require.Equal(t, map[string]any{"route": d.Route, "role": "viewer", "need": "operator", "unaudited": float64(3)}, detail)

	// Another session of the same account has its own allowance; the demo
	// admin (no session) is never recorded.
	other, err := svc.Login(ctx, "bob", goodPassword, "192.0.2.41")
	require.NoError(t, err)
	recorded, err = svc.RecordDenied(ctx, other.Principal, d)
	require.NoError(t, err)
	require.True(t, recorded)
	recorded, err = svc.RecordDenied(ctx, DemoAdmin, d)
	require.NoError(t, err)
	require.False(t, recorded)
}

// Refusals of one session arriving at once (from several console
// instances) still write one row: the session's row lock serialises them.
func TestConcurrentRefusalsWriteOneRow(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{})
	ctx := context.Background()
	sess, err := svc.Login(ctx, "bob", goodPassword, "192.0.2.42")
	require.NoError(t, err)
	const n = 20
	results := make(chan bool, n)
	errs := make(chan error, n)
	testwait.Together(n, func(int) {
		recorded, err := svc.RecordDenied(ctx, sess.Principal, Denial{Target: "GET /audit", Route: "/audit", Need: Admin})
		results <- recorded
		errs <- err
	})
	close(results)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	recorded := 0
	for r := range results {
		if r {
			recorded++
		}
	}
	require.Equal(t, 1, recorded)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'access.denied'`))
	require.Equal(t, n-1, count(t, pool, `SELECT denied_unaudited FROM switchyard.sessions WHERE id = $1`, sess.Principal.SessionID))
}

// A target the database could not store as text (a NUL, invalid UTF-8, a
// multi-byte character where it is cut) is still recorded, made valid.
func TestRefusalWithAnUnstorableTargetIsRecorded(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{DeniedAuditInterval: time.Nanosecond})
	ctx := context.Background()
	sess, err := svc.Login(ctx, "bob", goodPassword, "192.0.2.42")
	require.NoError(t, err)
	for _, target := range []string{"GET /messages/\x00/payload", "GET /messages/\xff/payload", "GET /" + strings.Repeat("é", 150)} {
		recorded, err := svc.RecordDenied(ctx, sess.Principal, Denial{Target: target, Route: "/messages/:id/payload", Need: Operator})
		require.NoError(t, err, "%q", target)
		require.True(t, recorded, "%q", target)
		_, err = pool.Exec(ctx, `UPDATE switchyard.sessions SET denied_audited_at = now() - interval '1 hour' WHERE id = $1`, sess.Principal.SessionID)
		require.NoError(t, err)
	}
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'access.denied' AND actor = 'bob'`))
}
