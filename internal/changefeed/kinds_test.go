package changefeed

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// insertKind finds an insert into the feed and what it puts in kind: a
// literal ('dead_letter') or a parameter (@kind, checked by Append).
var insertKind = regexp.MustCompile(`(?is)INSERT\s+INTO\s+switchyard\.changes\s*\(\s*kind\b[^)]*\)\s*(?:SELECT|VALUES\s*\()\s*(@kind|'([^']*)')`)

// TestSQLKindsAreConstants holds every kind that SQL writes as a literal
// (the queries and the migrations) to the Kind constants: a view
// subscribes by kind, so a kind spelled differently in SQL is a change no
// page ever sees.
func TestSQLKindsAreConstants(t *testing.T) {
	t.Parallel()
	var files []string
	for _, dir := range []string{"../queries/sql", "../../migrations"} {
		found, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		require.NoError(t, err)
		require.NotEmpty(t, found, "no SQL files in %s", dir)
		files = append(files, found...)
	}
	literals, params := 0, 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range insertKind.FindAllStringSubmatch(string(text), -1) {
			if m[1] == "@kind" {
				params++
				continue
			}
			literals++
			require.Truef(t, slices.Contains(Kinds, m[2]), "%s inserts kind %q, which is not a changefeed Kind constant", f, m[2])
		}
	}
	// Six statements write a literal kind today and one (Append) a
	// parameter: fewer found means the pattern no longer matches them.
	require.GreaterOrEqual(t, literals, 6, "literal kinds found")
	require.Equal(t, 1, params, "parameter kinds found")
}

// TestKindsAreValid checks every constant against Append's own rule.
func TestKindsAreValid(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range Kinds {
		require.NoError(t, validate(Change{Kind: k}), k)
		require.False(t, seen[k], "kind %q listed twice", k)
		seen[k] = true
	}
}
