package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseBenchArgs lets the console's flags through to the console and the
// bench's (including --workers, which both define) to the bench.
func TestParseBenchArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args       []string
		wantRest   []string
		wantURL    string
		wantWorker string
	}{
		{[]string{"dispatch"}, []string{"dispatch"}, "", "4"},
		{[]string{"dispatch", "--messages", "10", "--database-url", "postgres://x/y", "--workers", "2"},
			[]string{"dispatch", "--messages", "10", "--workers", "2"}, "postgres://x/y", "4"},
		{[]string{"--database-url=postgres://a/b", "dispatch", "--destination=http", "-rate", "5"},
			[]string{"dispatch", "--destination=http", "-rate", "5"}, "postgres://a/b", "4"},
		{[]string{"dispatch", "--wake=local", "--", "--database-url", "z"},
			[]string{"dispatch", "--wake=local", "--", "--database-url", "z"}, "", "4"},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("console bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		url := fs.String("database-url", "", "")
		workers := fs.String("workers", "4", "")
		rest, err := parseBenchArgs(fs, tc.args)
		require.NoError(t, err, "%q", tc.args)
		require.Equal(t, tc.wantRest, rest, "%q", tc.args)
		require.Equal(t, tc.wantURL, *url)
		require.Equal(t, tc.wantWorker, *workers)
	}
}
