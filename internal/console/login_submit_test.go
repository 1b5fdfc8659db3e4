package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

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

// While a sign-in delay runs, /login answers 429 with a Retry-After in
// whole seconds; the browser that signed in before, showing its device
// cookie, is not delayed by others' failures from its address.
func TestSignInDelayAnswers429AndSparesTheDeviceCookie(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	first := b.request(http.MethodPost, "/login", "", url.Values{"name": {"admin"}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, first.Code)
	device := sessionCookieOf(t, first, "switchyard_device")
	require.True(t, device.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, device.SameSite)
	require.Greater(t, time.Until(device.Expires), 80*24*time.Hour)

	// Someone at the same address failed 25 times (b.request's address).
	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.login_failures (account, address, client)
		SELECT 'admin', '192.0.2.10', 'addr:192.0.2.10' FROM generate_series(1, 25)`)
	require.NoError(t, err)
	rec := b.request(http.MethodPost, "/login", "", url.Values{"name": {"admin"}, "password": {password}})
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 900, secs, 30, "20 failures past the free 5: the longest delay, 15 minutes")
	require.Contains(t, rec.Body.String(), "Try again in")

	form := url.Values{"name": {"admin"}, "password": {password}}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.RemoteAddr = "192.0.2.10:41000"
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: device.Name, Value: device.Value})
	withDevice := httptest.NewRecorder()
	b.e.ServeHTTP(withDevice, req)
	require.Equal(t, http.StatusSeeOther, withDevice.Code, withDevice.Body.String())
}
