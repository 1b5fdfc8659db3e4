package pgembed

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Another process may take the free port before the server binds it: the
// start is retried on a new port.
func TestStartRetriesWhenThePortIsTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	picks := 0
	cfg := testConfig(t)
	cfg.pickPort = func() (int, error) {
		picks++
		if picks == 1 {
			return busy, nil
		}
		return freePort()
	}
	c := startCluster(t, cfg)
	require.Equal(t, 2, picks)
	require.NotEqual(t, busy, c.Port())
	exec1(t, c, "SELECT 1")
	log, err := os.ReadFile(c.LogPath())
	require.NoError(t, err)
	require.Contains(t, string(log), "could not bind")
}

// The server log belongs to the server account and is moved aside at a
// start once it has grown past 10 MiB.
func TestServerLogIsOwnedByTheServerAndRotated(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	c := startCluster(t, cfg)
	require.Equal(t, serverAccount(t).uid, ownerUID(t, c.LogPath()))
	require.NoError(t, c.Stop())
	require.NoError(t, os.Truncate(c.LogPath(), maxLogSize+1))

	again := startCluster(t, cfg)
	rotated, err := os.Stat(again.LogPath() + ".1")
	require.NoError(t, err)
	require.Equal(t, int64(maxLogSize+1), rotated.Size())
	current, err := os.ReadFile(again.LogPath())
	require.NoError(t, err)
	require.Less(t, len(current), 1<<20)
	require.True(t, strings.Contains(string(current), "database system is ready"), "the new log has this start")
	require.Equal(t, serverAccount(t).uid, ownerUID(t, again.LogPath()))
}
