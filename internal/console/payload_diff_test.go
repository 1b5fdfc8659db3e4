package console

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLineDiff(t *testing.T) {
	t.Parallel()
	render := func(a, b string) (string, bool) {
		lines, changed := lineDiff(a, b)
		var out []string
		for _, l := range lines {
			out = append(out, l.Op+l.Text)
		}
		return strings.Join(out, "|"), changed
	}
	for _, tc := range []struct {
		a, b, want string
		changed    bool
	}{
		{"x\ny", "x\ny", " x| y", false},
		{"x\ny", "x\nz", " x|-y|+z", true},
		{"a\nb\nc", "a\nc", " a|-b| c", true},
		{"a\nc", "a\nb\nc", " a|+b| c", true},
		{"", "a", "-|+a", true},
	} {
		got, changed := render(tc.a, tc.b)
		require.Equal(t, tc.want, got, "%q -> %q", tc.a, tc.b)
		require.Equal(t, tc.changed, changed)
	}
	big := strings.Repeat("x\n", maxDiffLines+1)
	lines, changed := lineDiff(big, "y")
	require.True(t, changed)
	require.Len(t, lines, maxDiffLines+3, "past the bound: all removed, then all added")
}
