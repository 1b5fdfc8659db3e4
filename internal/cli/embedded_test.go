package cli

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/migrations"
)

// The README's first command in miniature: start on a fresh data directory,
// stop with Ctrl-C leaving no server behind, start again on the same data,
// survive kill -9, and stop with SIGTERM.
func TestEmbeddedPostgresLifecycle(t *testing.T) {
	t.Parallel()
	data := filepath.Join(dataParent(t), "data")

	first := serveConsole(t, nil, "--data", data)
	status, body := get(t, first.URL+"/")
	require.Equal(t, 200, status)
	require.Contains(t, body, "Dashboard")
	pid := postmasterPID(t, data)
	first.Signal(t, syscall.SIGINT)
	require.Equal(t, 0, first.WaitExit(t, 30*time.Second))
	require.False(t, processAlive(pid), "Ctrl-C must leave no postgres process")
	require.Contains(t, first.Stderr(), "embedded postgres stopped", "the log says the server stopped")
	_, err := os.Stat(filepath.Join(data, "pg", "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "postgres shut down cleanly")

	second := serveConsole(t, nil, "--data", data)
	require.Contains(t, second.Stderr(), "migrations_applied=0", "the second start finds its migrated data")
	require.NotContains(t, second.Stderr(), "creating embedded postgres cluster")
	second.Signal(t, syscall.SIGKILL)
	require.Equal(t, -1, second.WaitExit(t, 10*time.Second), "killed by the signal")

	third := serveConsole(t, nil, "--data", data)
	require.Contains(t, third.Stderr(), "migrations_applied=0")
	third.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, third.WaitExit(t, 30*time.Second))
}

// A hang-up (the terminal that runs `make demo` or the console is closed,
// an ssh session drops) stops the console as Ctrl-C does: with the signal's
// default action it died at once and left its embedded PostgreSQL running,
// orphaned.
func TestHangupStopsTheConsoleAndItsPostgres(t *testing.T) {
	t.Parallel()
	data := filepath.Join(dataParent(t), "data")
	p := serveConsole(t, nil, "--data", data)
	pid := postmasterPID(t, data)
	t.Cleanup(func() { // if the test fails: the server it started must not outlive it
		if processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
	})
	p.Signal(t, syscall.SIGHUP)
	require.Equal(t, 0, p.WaitExit(t, 30*time.Second), "stopped, not killed by the signal")
	require.False(t, processAlive(pid), "a hang-up must leave no postgres process")
}

// Two consoles on one data directory would corrupt it: the second refuses.
func TestSecondConsoleOnSameDataIsRefused(t *testing.T) {
	t.Parallel()
	data := filepath.Join(dataParent(t), "data")
	serveConsole(t, nil, "--data", data)
	second := startConsole(t, nil, "--data", data, "--listen", consoletest.FreeAddr(t))
	require.Equal(t, 1, second.WaitExit(t, 30*time.Second))
	require.Contains(t, second.Stderr(), "in use by another Switchyard process")
}

func TestUnreachableDatabaseURLFailsFastWithOneLine(t *testing.T) {
	t.Parallel()
	// A port we hold, where every connection is closed at once: unlike a
	// port merely believed free, no other process can take it meanwhile.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	start := time.Now()
	p := startConsole(t, []string{"DATABASE_URL=postgres://switchyard@" + ln.Addr().String() + "/switchyard"}, "--listen", consoletest.FreeAddr(t))
	code := p.WaitExit(t, 10*time.Second)
	require.NotZero(t, code)
	require.Less(t, time.Since(start), 10*time.Second)
	out := strings.TrimSpace(p.Stderr())
	require.NotContains(t, out, "\n", "one line, not a stack of errors")
	require.Contains(t, out, "console: cannot reach the database at 127.0.0.1")
}

func TestDataDirectoryThatIsNotAClusterIsLeftAlone(t *testing.T) {
	t.Parallel()
	data := filepath.Join(dataParent(t), "data")
	require.NoError(t, os.MkdirAll(filepath.Join(data, "pg"), 0o755))
	keep := filepath.Join(data, "pg", "notes.txt")
	require.NoError(t, os.WriteFile(keep, []byte("mine"), 0o644))
	p := startConsole(t, nil, "--data", data, "--listen", consoletest.FreeAddr(t))
	require.Equal(t, 1, p.WaitExit(t, 30*time.Second))
	require.Contains(t, p.Stderr(), "is not a PostgreSQL cluster")
	got, err := os.ReadFile(keep)
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
}

func TestMissingServerBinariesSayHowToInstall(t *testing.T) {
	t.Parallel()
	// No pg_config on PATH and no installation under the search root: the
	// machine has no PostgreSQL server at all, as far as the console sees.
	empty := t.TempDir()
	p := startConsole(t, []string{"PATH=" + empty, "SWITCHYARD_PG_SEARCH=" + empty},
		"--data", filepath.Join(dataParent(t), "data"), "--listen", consoletest.FreeAddr(t))
	require.Equal(t, 1, p.WaitExit(t, 10*time.Second))
	out := strings.TrimSpace(p.Stderr())
	require.NotContains(t, out, "\n", "one line")
	require.Contains(t, out, "apt-get install postgresql")

	wrong := startConsole(t, nil, "--data", filepath.Join(dataParent(t), "data"), "--pg-bin", empty, "--listen", consoletest.FreeAddr(t))
	require.Equal(t, 1, wrong.WaitExit(t, 10*time.Second))
	require.Contains(t, wrong.Stderr(), "apt-get install postgresql")
}

func TestDatabaseURLStartsNoServerOfItsOwn(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	data := filepath.Join(dataParent(t), "unused")
	p := serveConsole(t, []string{"DATABASE_URL=" + url}, "--data", data)
	require.Contains(t, p.Stderr(), "embedded=false")
	_, err := os.Stat(data)
	require.ErrorIs(t, err, os.ErrNotExist, "no data directory is created")
	status, _ := get(t, p.URL+"/readyz")
	require.Equal(t, 200, status)
	p.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.WaitExit(t, 30*time.Second))
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	newest := files[len(files)-1]
	version := strings.TrimLeft(strings.SplitN(newest, "_", 2)[0], "0")
	env := []string{"DATABASE_URL=" + dbtest.NewURL(t)}
	migrate := func(args ...string) string {
		t.Helper()
		p := startConsole(t, env, append([]string{"migrate"}, args...)...)
		require.Equal(t, 0, p.WaitExit(t, 30*time.Second), p.Stderr())
		return p.Stdout()
	}
	status := migrate("status")
	for _, f := range files {
		require.Regexp(t, `(?m)\s+applied\s+\d{4}-.*\s`+regexp.QuoteMeta(f)+`$`, status)
	}
	require.Equal(t, "rolled back one migration\n", migrate("down"))
	require.Regexp(t, `(?m)^`+version+`\s+pending\s+-\s+`+regexp.QuoteMeta(newest)+`$`, migrate("status"))
	require.Equal(t, "applied 1 migration(s)\n", migrate("up"))
	require.Equal(t, "applied 0 migration(s)\n", migrate())

	bad := startConsole(t, env, "migrate", "sideways")
	require.Equal(t, 1, bad.WaitExit(t, 10*time.Second))
	require.Contains(t, bad.Stderr(), `unknown migrate action "sideways"`)
}

// Demo mode signs everyone in: it refuses a non-loopback address before it
// touches the database. (Without demo mode, see user_test.go.)
func TestDemoModeRefusesNonLoopbackAddresses(t *testing.T) {
	t.Parallel()
	p := startConsole(t, []string{"DATABASE_URL=postgres://unused@127.0.0.1:1/x"}, "--demo", "--listen", "0.0.0.0:0")
	require.Equal(t, 1, p.WaitExit(t, 10*time.Second))
	require.Contains(t, p.Stderr(), "refusing to listen on 0.0.0.0:0 in demo mode")
}
