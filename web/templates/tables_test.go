package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every table a template writes is a table.data right inside its own
// div.table-scroll: the one box a wide table scrolls in (app.css), so that
// it never widens the page, at any width. The browser tests see only the
// tables their fixtures fill; this sees every one, filled or not.
func TestEveryTableIsInItsScrollBox(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.templ")
	require.NoError(t, err)
	tables := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		prev := ""
		for i, line := range strings.Split(string(src), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "<table") {
				tables++
				require.True(t, strings.HasPrefix(line, `<table class="data"`), "%s:%d: a table that is not a table.data: %s", name, i+1, line)
				require.Equal(t, `<div class="table-scroll">`, prev, "%s:%d: a table.data outside its own div.table-scroll", name, i+1)
			}
			if line != "" {
				prev = line
			}
		}
	}
	require.NotZero(t, tables, "no table found: the test reads the wrong files")
}
