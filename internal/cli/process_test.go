package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/pgembed"
)

// consoleBinary is the console built once by TestMain: these tests run it as
// a real process, because signals, kill -9 and exit codes are what they
// check. Set before any test runs, only read afterwards.
var consoleBinary string

func TestMain(m *testing.M) {
	dbtest.MainWith(m, func() (func(), error) {
		dir, err := os.MkdirTemp("", "console-bin-")
		if err != nil {
			return nil, err
		}
		if consoleBinary, err = consoletest.Build(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		return func() { os.RemoveAll(dir) }, nil
	})
}

func startConsole(t *testing.T, env []string, args ...string) *consoletest.Process {
	t.Helper()
	return consoletest.Start(t, consoleBinary, env, args...)
}

// serveConsole serves in demo mode: these tests open pages and streams
// without signing in (user_test.go tests sign-in).
func serveConsole(t *testing.T, env []string, args ...string) *consoletest.Process {
	t.Helper()
	return consoletest.Serve(t, consoleBinary, append(env, "SWITCHYARD_DEMO=true"), args...)
}

// dataParent returns a directory the postgres account can traverse when the
// tests run as root (t.TempDir's directories are private to us).
func dataParent(t *testing.T) string {
	t.Helper()
	dir, err := pgembed.MkdirTemp("console-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// postmasterPID reads the embedded server's pid from its data directory.
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(dataDir, "pg", "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(content), "\n", 2)[0]))
	require.NoError(t, err)
	return pid
}

func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body.String()
}
