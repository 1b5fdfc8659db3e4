package auth

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHashPasswordIsPHCWithItsParameters(t *testing.T) {
	t.Parallel()
	encoded := HashPassword(goodPassword, DefaultParams)
	require.Regexp(t, `^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`, encoded)
	ok, params, err := VerifyPassword(encoded, goodPassword)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, DefaultParams, params)
	ok, _, err = VerifyPassword(encoded, goodPassword+"!")
	require.NoError(t, err)
	require.False(t, ok)
	require.NotEqual(t, encoded, HashPassword(goodPassword, DefaultParams), "a fresh salt each time")
}

// argon2 reads the whole password: two long passwords that share their
// first 72 bytes (where bcrypt would stop) are different passwords.
func TestLongPasswordsAreNotTruncated(t *testing.T) {
	t.Parallel()
	prefix := strings.Repeat("x", 72)
	encoded := HashPassword(prefix+"first", DefaultParams)
	ok, _, err := VerifyPassword(encoded, prefix+"second")
	require.NoError(t, err)
	require.False(t, ok)
	ok, _, err = VerifyPassword(encoded, prefix+"first")
	require.NoError(t, err)
	require.True(t, ok)
}

// A hash made with weaker parameters still verifies and is reported weaker,
// so that sign-in can upgrade it.
func TestOlderParametersStillVerify(t *testing.T) {
	t.Parallel()
	weak := Params{Time: 1, MemoryKiB: 8 * 1024, Threads: 1, KeyLen: 32}
	ok, params, err := VerifyPassword(HashPassword(goodPassword, weak), goodPassword)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, params.weaker(DefaultParams))
	require.False(t, DefaultParams.weaker(DefaultParams))
}

func TestMalformedHashesAreErrors(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "plain", "$argon2i$v=19$m=1,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=18$m=19456,t=2,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=0,t=2,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=19456,t=2,p=1$!!$a2V5a2V5a2V5a2V5a2V5a2V5"} {
		_, _, err := VerifyPassword(h, goodPassword)
		require.ErrorIs(t, err, errMalformedHash, h)
	}
}

func TestCheckPassword(t *testing.T) {
	t.Parallel()
	for pw, ok := range map[string]bool{
		"short":                     false,
		"elevenchars":               false,
		"twelve chars":              true,
		"ääääääääääää":              true, // 12 characters, 24 bytes
		strings.Repeat("a", 1024):   true,
		strings.Repeat("a", 1025):   false,
		"twelve chars\xff invalid!": false,
	} {
		if ok {
			require.NoError(t, CheckPassword(pw), pw)
		} else {
			require.ErrorIs(t, CheckPassword(pw), ErrWeakPassword, pw)
		}
	}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"viewer", "operator", "admin"} {
		r, err := ParseRole(name)
		require.NoError(t, err)
		require.Equal(t, name, r.String())
	}
	_, err := ParseRole("public")
	require.Error(t, err, "public is nobody's role")
	require.True(t, Admin.Allows(Operator))
	require.True(t, Operator.Allows(Viewer))
	require.False(t, Viewer.Allows(Operator))
	require.False(t, Operator.Allows(Admin))
}
