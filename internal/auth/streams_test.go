package auth

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// Live streams are capped per session and per account on one instance:
// the oldest is closed first (ErrTooManyStreams), the others stay open,
// and another account's are untouched.
func TestStreamGuardCapsStreamsOldestFirst(t *testing.T) {
	t.Parallel()
	guard := NewStreamGuardWith(StreamLimits{PerSession: 2, PerAccount: 3})
	ctx := context.Background()
	open := func(session, account int64) context.Context {
		c, stop := guard.Open(ctx, Principal{SessionID: session, UserID: account})
		t.Cleanup(stop)
		return c
	}
	capped := func(c context.Context) bool { return errors.Is(context.Cause(c), ErrTooManyStreams) }

	first, second := open(1, 10), open(1, 10)
	third := open(1, 10)
	require.True(t, capped(first), "the session's oldest closes first")
	require.NoError(t, second.Err())
	require.NoError(t, third.Err())

	other := open(3, 20) // another account
	fourth := open(2, 10)
	require.NoError(t, fourth.Err(), "the account has three now")
	fifth := open(2, 10)
	require.True(t, capped(second), "then the account's oldest")
	require.NoError(t, third.Err())
	require.NoError(t, fifth.Err())
	require.NoError(t, other.Err())
}

// Many streams opened at once on one session: exactly the cap stays open.
func TestStreamGuardCapHoldsUnderABurst(t *testing.T) {
	t.Parallel()
	const n, limit = 200, 8
	guard := NewStreamGuardWith(StreamLimits{PerSession: limit, PerAccount: limit})
	ctxs := make([]context.Context, n)
	stops := make([]func(), n)
	testwait.Together(n, func(i int) {
		ctxs[i], stops[i] = guard.Open(context.Background(), Principal{SessionID: 1, UserID: 1})
	})
	open, capped := 0, 0
	for _, c := range ctxs {
		switch {
		case c.Err() == nil:
			open++
		case errors.Is(context.Cause(c), ErrTooManyStreams):
			capped++
		}
	}
	require.Equal(t, limit, open)
	require.Equal(t, n-limit, capped)
	for _, stop := range stops {
		stop()
	}
	require.Zero(t, guard.Watched())
	guard.mu.Lock()
	defer guard.mu.Unlock()
	require.Empty(t, guard.bySession)
	require.Empty(t, guard.byAccount)
}
