package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/httpserver"
)

func TestParseWebSettings(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (config, error) {
		return parseConfig(args, func(string) string { return "" }, &bytes.Buffer{})
	}
	c, err := parse()
	require.NoError(t, err)
	require.Equal(t, httpserver.Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: time.Minute, Idle: 2 * time.Minute}, c.web.timeouts)
	require.Equal(t, httpserver.ConnLimits{PerAddress: 128, Total: 2048}, c.web.conns)
	require.False(t, c.metricsHidden(), "public on loopback")

	c, err = parse("--listen", "0.0.0.0:8080")
	require.NoError(t, err)
	require.True(t, c.metricsHidden(), "beyond loopback, not without a token")
	c, err = parse("--listen", "0.0.0.0:8080", "--metrics-token", "s3cret")
	require.NoError(t, err)
	require.False(t, c.metricsHidden(), "behind the token")
	c, err = parse("--metrics-listen", "127.0.0.1:9100")
	require.NoError(t, err)
	require.True(t, c.metricsHidden(), "served on their own address only")

	c, err = parse("--read-timeout", "5s", "--write-timeout", "10s", "--idle-timeout", "1m", "--max-conns-per-address", "10", "--max-conns", "20")
	require.NoError(t, err)
	require.Equal(t, httpserver.Timeouts{ReadHeader: 10 * time.Second, Read: 5 * time.Second, Write: 10 * time.Second, Idle: time.Minute}, c.web.timeouts)
	require.Equal(t, httpserver.ConnLimits{PerAddress: 10, Total: 20}, c.web.conns)

	for _, bad := range [][]string{
		{"--read-timeout", "0s"}, {"--write-timeout", "fast"}, {"--max-conns", "0"},
		{"--max-conns-per-address", "30", "--max-conns", "20"},
	} {
		_, err := parse(bad...)
		require.Error(t, err, bad)
	}
}
