package e2e

import (
	"testing"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// startConsole starts the console binary in demo mode (every page opens
// as the demo admin, without signing in) on a fresh database and a free
// port, and returns once /readyz answers 200. Its output goes to the test
// log. When the test ends it must stop cleanly on SIGTERM (exit status 0).
// Tests of sign-in itself use startConsoleWithAccounts.
func startConsole(t *testing.T) *consoletest.Process {
	t.Helper()
	// First, so that its cleanup (dropping the database) runs after the
	// process is stopped: cleanups run last-in, first-out.
	dbURL := dbtest.NewURL(t)
	p := consoletest.Serve(t, useSuite(t).binary, []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_DEMO=true"})
	t.Cleanup(func() { p.Stop(t) })
	return p
}
