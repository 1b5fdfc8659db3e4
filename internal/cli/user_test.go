package cli

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// runUser runs `console user ...` in this process with stdin.
func runUser(t *testing.T, dbURL, stdin string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}
	code := run(append([]string{"user"}, args...), getenv, strings.NewReader(stdin), &out, &errOut)
	return code, out.String() + errOut.String()
}

// Outside demo mode, a non-loopback address needs an account: the first
// start says how to create the first admin; once one exists, it serves.
func TestNonLoopbackServingNeedsAnAccount(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	env := []string{"DATABASE_URL=" + dbURL, "SWITCHYARD_WORKERS=0"}
	refused := startConsole(t, env, "--listen", "0.0.0.0:0")
	require.Equal(t, 1, refused.WaitExit(t, time.Minute))
	require.Contains(t, refused.Stderr(), "no account exists yet")
	require.Contains(t, refused.Stderr(), "console user add --role admin NAME")

	code, out := runUser(t, dbURL, "short\n", "add", "--role", "admin", "alice")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "at least 12 characters")
	code, out = runUser(t, dbURL, "correct horse battery\n", "add", "--role", "root", "alice")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `unknown role "root"`)
	code, out = runUser(t, dbURL, "correct horse battery\n", "add", "--role", "admin", "alice")
	require.Equal(t, 0, code, out)
	code, out = runUser(t, dbURL, "correct horse battery\n", "add", "alice", "--role", "viewer")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "account exists")
	code, out = runUser(t, dbURL, "another good password\n", "passwd", "alice")
	require.Equal(t, 0, code, out)
	code, out = runUser(t, dbURL, "", "disable", "nobody")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "no such account")

	port := freePort(t)
	p := startConsole(t, env, "--listen", "0.0.0.0:"+port)
	p.URL = "http://127.0.0.1:" + port
	p.WaitReady(t, time.Minute)
	status, _ := get(t, p.URL+"/")
	require.Equal(t, 200, status, "the sign-in page (get follows the redirect)")
	p.Stop(t)

	var verify bytes.Buffer
	require.Equal(t, 0, run([]string{"audit", "verify"}, func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}, nil, &verify, &verify), verify.String())
	require.Contains(t, verify.String(), "hash chain: 2 rows verified")
	require.Contains(t, verify.String(), "audit trail intact")
}

func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(consoletest.FreeAddr(t))
	require.NoError(t, err)
	return port
}
