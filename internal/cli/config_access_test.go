package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseAccessSettings(t *testing.T) {
	t.Parallel()
	parse := func(args []string, env map[string]string) (config, error) {
		return parseConfig(args, func(k string) string { return env[k] }, &bytes.Buffer{})
	}
	c, err := parse(nil, nil)
	require.NoError(t, err)
	require.False(t, c.demo)
	require.False(t, c.secureCookies)
	require.False(t, c.viewerPayloads)
	require.Nil(t, c.allowedHosts)
	require.Equal(t, 30*time.Minute, c.sessionIdle)
	require.Equal(t, 12*time.Hour, c.sessionMax)

	c, err = parse([]string{"--demo", "--secure-cookies", "--allowed-hosts", "console.example, ops.example", "--session-idle", "5m"}, nil)
	require.NoError(t, err)
	require.True(t, c.demo, "a switch alone turns it on")
	require.True(t, c.secureCookies)
	require.Equal(t, []string{"console.example", "ops.example"}, c.allowedHosts)
	require.Equal(t, 5*time.Minute, c.sessionIdle)

	c, err = parse([]string{"--demo=false"}, map[string]string{"SWITCHYARD_DEMO": "true", "SWITCHYARD_VIEWER_PAYLOADS": "1"})
	require.NoError(t, err)
	require.False(t, c.demo, "the flag beats the environment")
	require.True(t, c.viewerPayloads)

	_, err = parse(nil, map[string]string{"SWITCHYARD_DEMO": "maybe"})
	require.ErrorContains(t, err, `invalid $SWITCHYARD_DEMO "maybe"`)
	_, err = parse([]string{"--session-idle", "10s"}, nil)
	require.ErrorContains(t, err, "invalid session idle timeout")
	_, err = parse([]string{"--session-max", "10m", "--session-idle", "30m"}, nil)
	require.ErrorContains(t, err, "invalid session lifetime")

	c, err = parse([]string{"user", "add", "--role", "admin", "alice", "--log-level", "debug"}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"add", "--role", "admin", "alice"}, c.args, "--role is the user command's")
}
