package auth

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// loginWork signs in and returns the argon2id work it cost.
func loginWork(t *testing.T, svc *Service, name, password string) int64 {
	t.Helper()
	before := svc.work.Load()
	_, err := svc.Login(context.Background(), name, password, "192.0.2.30")
	require.ErrorIs(t, err, ErrInvalidCredentials, name)
	return svc.work.Load() - before
}

// An account whose hash was made with weaker parameters (they were raised
// since) costs the same argon2id work as an unknown name: its own
// verification plus padding. It still signs in, and is rehashed then.
func TestWeakerHashCostsAsMuchAsAnUnknownName(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{Params: DefaultParams})
	ctx := context.Background()
	old := Params{Time: 1, MemoryKiB: 8 * 1024, Threads: 1, KeyLen: 32}
	_, err := pool.Exec(ctx, `UPDATE switchyard.users SET password_hash = $1 WHERE name = 'bob'`, HashPassword(goodPassword, old))
	require.NoError(t, err)

	unknown := loginWork(t, svc, "nobody", goodPassword)
	require.Equal(t, DefaultParams.work(), unknown)
	weak := loginWork(t, svc, "bob", "wrong password!")
	require.InDelta(t, unknown, weak, float64(DefaultParams.Time), "padded to the current parameters' work")
	require.Greater(t, weak, old.work(), "more than the weak hash's own verification")
	current := loginWork(t, svc, "alice", "wrong password!")
	require.Equal(t, unknown, current)

	_, err = svc.Login(ctx, "bob", goodPassword, "192.0.2.30")
	require.NoError(t, err, "the weak hash still signs in")
	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT password_hash FROM switchyard.users WHERE name = 'bob'`).Scan(&stored))
	p, _, _, err := decodeHash(stored)
	require.NoError(t, err)
	require.Equal(t, DefaultParams, p, "rehashed at sign-in")
}

func TestPaddingMakesUpTheGap(t *testing.T) {
	t.Parallel()
	want := Params{Time: 3, MemoryKiB: 64 * 1024, Threads: 2, KeyLen: 32}
	for _, tc := range []struct {
		name string
		p    Params
		pad  bool
	}{
		{"weaker memory", Params{Time: 3, MemoryKiB: 32 * 1024, Threads: 2, KeyLen: 32}, true},
		{"weaker time", Params{Time: 1, MemoryKiB: 64 * 1024, Threads: 2, KeyLen: 32}, true},
		{"the same", want, false},
		{"stronger", Params{Time: 4, MemoryKiB: 64 * 1024, Threads: 2, KeyLen: 32}, false},
		{"a gap below argon2id's least memory", Params{Time: 3, MemoryKiB: 64*1024 - 5, Threads: 2, KeyLen: 32}, false},
	} {
		pad, ok := padding(tc.p, want)
		require.Equal(t, tc.pad, ok, tc.name)
		if !ok {
			continue
		}
		require.InDelta(t, want.work(), tc.p.work()+pad.work(), float64(want.Time), tc.name)
		require.LessOrEqual(t, pad.MemoryKiB, want.MemoryKiB, "%s: no more memory than a verification", tc.name)
		require.Equal(t, want.Threads, pad.Threads, tc.name)
	}
}

// A stored hash that does not parse answers like a wrong password (not an
// error, which would become a 500 and tell which names exist), at the
// same cost as an unknown name, and is logged for an admin to reset it.
func TestUnparsableHashAnswersLikeAWrongPassword(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	svc, pool := setup(t, Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE switchyard.users SET password_hash = '$argon2id$v=19$garbage' WHERE name = 'alice'`)
	require.NoError(t, err)

	unknown := loginWork(t, svc, "nobody", goodPassword)
	require.Equal(t, unknown, loginWork(t, svc, "alice", goodPassword), "the dummy's work")
	require.Contains(t, logged.String(), "stored password hash does not parse")
	require.Contains(t, logged.String(), "user=alice")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'login' AND outcome = 'failed' AND target = 'alice'`))

	err = svc.ChangeOwnPassword(ctx, Principal{UserID: 1, Name: "alice", Role: Admin}, goodPassword, "a brand new password", "192.0.2.30")
	require.ErrorIs(t, err, ErrInvalidCredentials, "a password change checks the same way")
}
