package cli

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/bench"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			require.Equal(t, "serve", c.command)
			require.Equal(t, "127.0.0.1:8080", c.listen)
			require.Equal(t, ".switchyard", c.dataDir)
			require.Empty(t, c.databaseURL)
			require.Equal(t, slog.LevelInfo, c.logLevel)
			require.Equal(t, 10*time.Second, c.shutdownTimeout)
			require.Equal(t, 10*time.Second, c.demoCheckInterval)
		}},
		{name: "demo check interval", args: []string{"demo"}, env: map[string]string{"SWITCHYARD_DEMO_CHECK_INTERVAL": "1s"},
			check: func(t *testing.T, c config) { require.Equal(t, time.Second, c.demoCheckInterval) }},
		{name: "demo check interval too short", args: []string{"demo", "--demo-check-interval", "500ms"}, wantErr: "invalid demo check interval"},
		{name: "environment", env: map[string]string{
			"SWITCHYARD_LISTEN": "127.0.0.1:9000", "SWITCHYARD_DATA": "/var/lib/sy",
			"DATABASE_URL": "postgres://db/x", "SWITCHYARD_LOG_LEVEL": "debug",
		}, check: func(t *testing.T, c config) {
			require.Equal(t, "127.0.0.1:9000", c.listen)
			require.Equal(t, "/var/lib/sy", c.dataDir)
			require.Equal(t, "postgres://db/x", c.databaseURL)
			require.Equal(t, slog.LevelDebug, c.logLevel)
		}},
		{name: "flag beats environment", args: []string{"serve", "--listen", "127.0.0.1:7000"},
			env:   map[string]string{"SWITCHYARD_LISTEN": "127.0.0.1:9000"},
			check: func(t *testing.T, c config) { require.Equal(t, "127.0.0.1:7000", c.listen) }},
		{name: "command and its arguments", args: []string{"migrate", "--data", "d", "status"},
			check: func(t *testing.T, c config) {
				require.Equal(t, "migrate", c.command)
				require.Equal(t, []string{"status"}, c.args)
				require.Equal(t, "d", c.dataDir)
			}},
		{name: "flags after the command's argument", args: []string{"migrate", "down", "--database-url", "postgres://x/y", "--log-level", "debug"},
			check: func(t *testing.T, c config) {
				require.Equal(t, []string{"down"}, c.args)
				require.Equal(t, "postgres://x/y", c.databaseURL)
				require.Equal(t, slog.LevelDebug, c.logLevel)
			}},
		{name: "bad flag after the argument", args: []string{"migrate", "status", "--log-level", "bogus"}, wantErr: `invalid log level "bogus"`},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: `invalid log level "loud"`},
		{name: "bad log format", args: []string{"--log-format", "xml"}, wantErr: `invalid log format "xml"`},
		{name: "bad timeout", args: []string{"--shutdown-timeout", "-1s"}, wantErr: "invalid shutdown timeout"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string { return tc.env[k] }
			c, err := parseConfig(tc.args, getenv, &bytes.Buffer{})
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"help"}, func(string) string { return "" }, nil, &out, &errOut)
	require.Equal(t, 0, code)
	for _, s := range settings {
		require.Contains(t, out.String(), "-"+s.flag)
		require.Contains(t, out.String(), "$"+s.env)
	}
	require.Equal(t, 2, run([]string{"--log-level", "loud"}, func(string) string { return "" }, nil, &out, &errOut))
	require.Equal(t, 1, run([]string{"frobnicate"}, func(string) string { return "" }, nil, &out, &errOut))
	require.Contains(t, errOut.String(), `unknown command "frobnicate"`)
}

// README.md's configuration table is the newcomer's reference: it must
// list every setting with its environment variable.
func TestReadmeListsEverySetting(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	for _, s := range settings {
		require.Contains(t, string(readme), "| `--"+s.flag+"` | `"+s.env+"` |", "README.md lacks --%s", s.flag)
	}
}

// `console help` lists every bench the README lists, and the README lists
// every bench there is.
func TestHelpListsEveryBenchOfTheReadme(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("`console bench\\s+([a-z|-]+)`?").FindSubmatch(readme)
	require.NotNil(t, m, "README.md names the benches as `console bench a|b|...`")
	listed := strings.Split(string(m[1]), "|")
	var names []string
	for _, b := range bench.Commands() {
		names = append(names, strings.Fields(b.Usage)[0])
	}
	require.ElementsMatch(t, names, listed, "README.md's benches are the benches there are")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"help"}, func(string) string { return "" }, nil, &out, &errOut))
	for _, name := range listed {
		require.Regexp(t, `(?m)^  console bench `+name+`\b`, out.String(), "console help lacks bench %s", name)
	}
}

// `console demo` keeps its data apart from the real console's unless told
// otherwise (issue 14, item 17).
func TestDemoHasItsOwnDataDirectory(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"demo"}, nil, ".switchyard-demo"},
		{nil, nil, ".switchyard"},
		{[]string{"serve", "--demo"}, nil, ".switchyard"},
		{[]string{"demo"}, map[string]string{"SWITCHYARD_DATA": "/srv/d"}, "/srv/d"},
		{[]string{"demo", "--data", "x"}, nil, "x"},
	} {
		cfg, err := parseConfig(tc.args, env(tc.env), io.Discard)
		require.NoError(t, err, tc.args)
		require.Equal(t, tc.want, cfg.dataDir, "%v %v", tc.args, tc.env)
	}
}

// The demo (traffic and demo sign-in) and demo sign-in (--demo) have one
// name each, said in `console help` and the README (issue 14, item 19).
func TestDemoAndDemoSignInAreNamedApart(t *testing.T) {
	t.Parallel()
	var help strings.Builder
	_, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &help)
	require.ErrorIs(t, err, errHelp)
	require.Contains(t, help.String(), "console demo [flags]             the demo (make demo)")
	require.Contains(t, help.String(), "demo sign-in only")
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "**the demo**\n(`make demo`, `console demo`)")
	require.Contains(t, string(readme), "**demo sign-in** (`--demo`)")
}
