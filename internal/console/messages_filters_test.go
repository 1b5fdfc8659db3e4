package console

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every list query of the message browser takes the same filters, written
// out in each (sqlc has no shared fragments): a filter missing from one
// access path would be ignored on that path alone. Each query's filter
// conditions are the first query's, the same text.
func TestEveryMessageListQueryAppliesEveryFilter(t *testing.T) {
	t.Parallel()
	sql, err := os.ReadFile("../queries/sql/console_messages.sql")
	require.NoError(t, err)
	// A condition, or the stage's CASE continued on the next lines.
	condition := regexp.MustCompile(`^\s*(?:WHERE\s+|AND\s+)?(\(sqlc\.narg\(\w+\).*|WHEN '(?:queued|retrying)'.*)$`)
	filters := map[string][]string{}
	var names []string
	var name string
	for line := range strings.SplitSeq(string(sql), "\n") {
		if n, ok := strings.CutPrefix(line, "-- name: "); ok {
			name = ""
			if q, _, _ := strings.Cut(n, " "); strings.HasPrefix(q, "ConsoleMessagesList") {
				name = q
				names = append(names, name)
			}
			continue
		}
		if m := condition.FindStringSubmatch(line); name != "" && m != nil {
			filters[name] = append(filters[name], strings.TrimSpace(m[1]))
		}
	}
	require.GreaterOrEqual(t, len(names), 24, "the list queries")
	want := filters[names[0]]
	require.Len(t, want, 14, "the filters of %s (the stage on three lines)", names[0])
	for _, n := range names[1:] {
		require.Equal(t, want, filters[n], "%s applies the filters of %s", n, names[0])
	}
}
