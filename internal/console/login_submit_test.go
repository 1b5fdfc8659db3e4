package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// An account whose stored hash does not parse is refused like a wrong
// password (401 and the same message), not with a 500 that would tell
// which names exist.
func TestUnparsableStoredHashAnswers401(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	_, err := b.pool.Exec(context.Background(), `UPDATE switchyard.users SET password_hash = 'not a hash' WHERE name = 'operator'`)
	require.NoError(t, err)
	broken := b.request(http.MethodPost, "/login", "", url.Values{"name": {"operator"}, "password": {password}})
	require.Equal(t, http.StatusUnauthorized, broken.Code)
	unknown := b.request(http.MethodPost, "/login", "", url.Values{"name": {"nobody"}, "password": {password}})
	require.Equal(t, http.StatusUnauthorized, unknown.Code)
	require.Contains(t, broken.Body.String(), "Wrong name or password.")
}
