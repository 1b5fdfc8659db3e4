package httpserver_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/httpserver"
)

// X-Forwarded-For is ignored from a peer that is not a trusted proxy (even
// loopback or a private address), and used from one that is: the
// right-most address no trusted proxy vouches for.
func TestClientAddressComesFromXForwardedForOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	proxies, err := httpserver.ParseTrustedProxies("10.0.0.0/24, 192.0.2.9")
	require.NoError(t, err)
	_, err = httpserver.ParseTrustedProxies("10.0.0.0/33")
	require.Error(t, err)
	_, err = httpserver.ParseTrustedProxies("proxy.example")
	require.Error(t, err)
	for _, tc := range []struct {
		name    string
		proxies bool
		peer    string
		xff     []string
		want    string
	}{
		{"no proxies: the peer", false, "10.0.0.5:1000", []string{"203.0.113.1"}, "10.0.0.5"},
		{"untrusted peer: the peer", true, "198.51.100.4:1000", []string{"203.0.113.1"}, "198.51.100.4"},
		{"loopback is not trusted unless listed", true, "127.0.0.1:1000", []string{"203.0.113.1"}, "127.0.0.1"},
		{"trusted peer: the forwarded client", true, "10.0.0.5:1000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"the right-most untrusted, not a spoofed left-most", true, "10.0.0.5:1000", []string{"6.6.6.6, 203.0.113.1"}, "203.0.113.1"},
		{"through two trusted proxies", true, "10.0.0.5:1000", []string{"6.6.6.6", "203.0.113.1, 192.0.2.9"}, "203.0.113.1"},
		{"trusted peer without the header: the peer", true, "10.0.0.5:1000", nil, "10.0.0.5"},
	} {
		cfg := httpserver.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()}
		if tc.proxies {
			cfg.TrustedProxies = proxies
		}
		e, err := httpserver.New(cfg)
		require.NoError(t, err)
		e.GET("/ip", func(c echo.Context) error { return c.String(http.StatusOK, c.RealIP()) })
		req := httptest.NewRequest(http.MethodGet, "/ip", nil)
		req.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		require.Equal(t, tc.want, rec.Body.String(), tc.name)
	}
}
