package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestLoginStartsASessionThatAuthenticates(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{})
	ctx := context.Background()
	sess, err := svc.Login(ctx, " Alice ", goodPassword, "192.0.2.7")
	require.NoError(t, err)
	require.Len(t, sess.Token, 43, "256 bits, base64url")
	p, err := svc.Authenticate(ctx, sess.Token)
	require.NoError(t, err)
	require.Equal(t, "alice", p.Name)
	require.Equal(t, Admin, p.Role)
	require.Equal(t, sess.Principal.SessionID, p.SessionID)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.sessions WHERE token_hash = convert_to($1, 'UTF8')`, sess.Token),
		"the token itself is never stored")

	again, err := svc.Login(ctx, "alice", goodPassword, "192.0.2.7")
	require.NoError(t, err)
	require.NotEqual(t, sess.Token, again.Token, "every sign-in gets a new token")

	require.NoError(t, svc.Logout(ctx, p, "192.0.2.7"))
	_, err = svc.Authenticate(ctx, sess.Token)
	require.ErrorIs(t, err, ErrNoSession)
	_, err = svc.Authenticate(ctx, again.Token)
	require.NoError(t, err, "logout ends only its own session")
	require.ErrorIs(t, svc.Logout(ctx, p, ""), ErrNoSession)

	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'login' AND outcome = 'ok' AND actor = 'alice'`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'logout' AND actor = 'alice' AND remote_addr = '192.0.2.7'`))
}

// A wrong name, a wrong password and a disabled account answer the same
// error after the same argon2id work: the name's existence is not leaked
// by the answer or its timing.
func TestWrongNameAndWrongPasswordDoTheSameWork(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{})
	ctx := context.Background()
	require.NoError(t, svc.Disable(ctx, CLI, "bob"))
	for _, tc := range []struct{ name, password string }{
		{"nobody", goodPassword}, {"alice", "wrong password!"}, {"bob", goodPassword},
	} {
		before := svc.verified.Load()
		_, err := svc.Login(ctx, tc.name, tc.password, "192.0.2.8")
		require.ErrorIs(t, err, ErrInvalidCredentials, tc.name)
		require.Equal(t, before+1, svc.verified.Load(), "%s: one argon2id verification", tc.name)
	}
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'login' AND outcome = 'failed'`))
}

func TestIdleAndAbsoluteTimeoutsEndSessions(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{IdleTimeout: 30 * time.Minute})
	ctx := context.Background()
	idle, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	old, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE switchyard.sessions SET last_seen_at = now() - interval '31 minutes' WHERE id = $1`, idle.Principal.SessionID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE switchyard.sessions SET expires_at = now() - interval '1 second' WHERE id = $1`, old.Principal.SessionID)
	require.NoError(t, err)
	for _, s := range []Session{idle, old} {
		_, err := svc.Authenticate(ctx, s.Token)
		require.ErrorIs(t, err, ErrNoSession)
	}
	_, err = svc.Authenticate(ctx, "")
	require.ErrorIs(t, err, ErrNoSession)
	_, err = svc.Authenticate(ctx, "not a token")
	require.ErrorIs(t, err, ErrNoSession)
}

// A password change and a disable end every session of the account and
// append the change that closes their streams everywhere.
func TestPasswordChangeAndDisableEndEverySession(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{})
	ctx := context.Background()
	a, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	b, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	require.ErrorIs(t, svc.SetPassword(ctx, CLI, "alice", "short"), ErrWeakPassword)
	require.NoError(t, svc.SetPassword(ctx, CLI, "alice", "another good password"))
	for _, s := range []Session{a, b} {
		_, err := svc.Authenticate(ctx, s.Token)
		require.ErrorIs(t, err, ErrNoSession)
	}
	var payload []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT payload::text FROM switchyard.changes WHERE kind = $1`, changefeed.KindSessionRevoked).Scan(&payload))
	var revoked struct{ Sessions []int64 }
	require.NoError(t, json.Unmarshal(payload, &revoked))
	require.ElementsMatch(t, []int64{a.Principal.SessionID, b.Principal.SessionID}, revoked.Sessions)
	_, err = svc.Login(ctx, "alice", goodPassword, "")
	require.ErrorIs(t, err, ErrInvalidCredentials, "the old password no longer works")

	c, err := svc.Login(ctx, "alice", "another good password", "")
	require.NoError(t, err)
	require.NoError(t, svc.Disable(ctx, CLI, "alice"))
	_, err = svc.Authenticate(ctx, c.Token)
	require.ErrorIs(t, err, ErrNoSession)
	_, err = svc.Login(ctx, "alice", "another good password", "")
	require.ErrorIs(t, err, ErrInvalidCredentials)
	require.ErrorIs(t, svc.Disable(ctx, CLI, "nobody"), ErrNoUser)
	require.ErrorIs(t, svc.AddUser(ctx, CLI, "bob", Viewer, goodPassword), ErrUserExists)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'password.change' AND target = 'alice' AND actor = 'cli'`))
}

// A revocation committed on one instance cancels the watched streams of
// that session on another (a second listener on the same database), and
// no other stream.
func TestStreamGuardCancelsStreamsOfRevokedSessions(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{})
	ctx := context.Background()
	listener := changefeed.NewListener(pool, changefeed.Config{})
	require.NoError(t, listener.Start(ctx))
	t.Cleanup(listener.Stop)
	guard := NewStreamGuard()
	_, unsubscribe := listener.Subscribe(guard.Observe)
	t.Cleanup(unsubscribe)

	mine, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	other, err := svc.Login(ctx, "bob", goodPassword, "")
	require.NoError(t, err)
	watched, stop := guard.Watch(ctx, mine.Principal.SessionID, mine.ExpiresAt)
	defer stop()
	untouched, stopOther := guard.Watch(ctx, other.Principal.SessionID, time.Time{})
	defer stopOther()
	require.Equal(t, 2, guard.Watched())

	require.NoError(t, svc.RevokeSession(ctx, Principal{Name: "bob", UserID: other.Principal.UserID}, mine.Principal.SessionID, ""))
	require.NoError(t, changefeed.Notify(ctx, pool))
	testwait.For(t, 10*time.Second, "the revoked session's stream to end", watched.Done())
	require.True(t, errors.Is(context.Cause(watched), ErrSessionRevoked))
	require.NoError(t, untouched.Err())
	stop()
	require.Equal(t, 1, guard.Watched())
}

// Sessions that ended more than a day ago are dropped at the next sign-in.
func TestSignInPrunesLongEndedSessions(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{})
	ctx := context.Background()
	old, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	recent, err := svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE switchyard.sessions SET revoked_at = now() - interval '25 hours' WHERE id = $1`, old.Principal.SessionID)
	require.NoError(t, err)
	_, err = svc.Login(ctx, "bob", goodPassword, "")
	require.NoError(t, err)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.sessions WHERE id = $1`, old.Principal.SessionID))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.sessions WHERE id = $1`, recent.Principal.SessionID))
}

// A hash made with weaker parameters than the configured ones is replaced
// at the next successful sign-in.
func TestSignInUpgradesWeakHashes(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{Params: DefaultParams})
	ctx := context.Background()
	weak := HashPassword(goodPassword, Params{Time: 1, MemoryKiB: 8 * 1024, Threads: 1, KeyLen: 32})
	_, err := pool.Exec(ctx, `UPDATE switchyard.users SET password_hash = $1 WHERE name = 'alice'`, weak)
	require.NoError(t, err)
	_, err = svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err)
	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT password_hash FROM switchyard.users WHERE name = 'alice'`).Scan(&stored))
	require.Contains(t, stored, "$m=19456,t=2,p=1$")
	_, err = svc.Login(ctx, "alice", goodPassword, "")
	require.NoError(t, err, "the upgraded hash verifies")
}

// A watched stream ends at its session's absolute timeout.
func TestStreamGuardEndsStreamsAtExpiry(t *testing.T) {
	t.Parallel()
	guard := NewStreamGuard()
	watched, stop := guard.Watch(context.Background(), 7, time.Now().Add(50*time.Millisecond))
	defer stop()
	testwait.For(t, 10*time.Second, "the stream to end with its session", watched.Done())
	require.ErrorIs(t, context.Cause(watched), ErrSessionExpired)
	stop()
	require.Zero(t, guard.Watched())
}

// A burst of concurrent guesses gets no more tries than the same guesses
// one after another: each attempt is counted before its password is
// checked.
func TestConcurrentGuessesAreThrottledToo(t *testing.T) {
	t.Parallel()
	svc, _ := setup(t, Config{AccountFreeFailures: 3, BaseDelay: time.Hour, ThrottleWindow: time.Hour})
	const guesses = 30
	var checked, throttled atomic.Int64
	testwait.Together(guesses, func(i int) {
		_, err := svc.Login(context.Background(), "alice", "wrong password!", fmt.Sprintf("192.0.2.%d", i))
		var th *ThrottledError
		switch {
		case errors.Is(err, ErrInvalidCredentials):
			checked.Add(1)
		case errors.As(err, &th):
			throttled.Add(1)
		default:
			t.Errorf("unexpected: %v", err)
		}
	})
	require.Equal(t, int64(3), checked.Load(), "only as many passwords checked as the limit allows")
	require.Equal(t, int64(guesses-3), throttled.Load())
}
