package testlog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// logs records what a test would log.
type logs struct {
	testing.TB
	lines []string
}

func (l *logs) Helper() {}

func (l *logs) Log(args ...any) {
	for _, a := range args {
		l.lines = append(l.lines, a.(string))
	}
}

func TestNewWritesToTheTestLog(t *testing.T) {
	t.Parallel()
	l := &logs{TB: t}
	New(l).Debug("claimed", "batch", 3)
	require.Len(t, l.lines, 1)
	require.True(t, strings.HasSuffix(l.lines[0], `level=DEBUG msg=claimed batch=3`), l.lines[0])
}
