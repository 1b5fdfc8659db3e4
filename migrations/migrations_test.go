package migrations_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/migrations"
)

var fileName = regexp.MustCompile(`^([0-9]{5})_([a-z][a-z0-9_]*)\.sql$`)

// checkNumbering reports what is wrong with a directory's migration file
// names: each must be NNNNN_area.sql, and the numbers must run 1, 2, 3...
// with no gap and no number twice (two branches that took the same next
// number clash here).
func checkNumbering(names []string) error {
	var problems []error
	seen := map[int]string{}
	highest := 0
	for _, name := range names {
		if name == "schema.sql" || !strings.HasSuffix(name, ".sql") {
			continue
		}
		m := fileName.FindStringSubmatch(name)
		if m == nil {
			problems = append(problems, fmt.Errorf("%s: not named NNNNN_area.sql (five digits, lower-case area)", name))
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if other, ok := seen[n]; ok {
			problems = append(problems, fmt.Errorf("%s and %s: the same number; renumber the newer to the next free one", other, name))
			continue
		}
		seen[n] = name
		highest = max(highest, n)
	}
	for n := 1; n <= highest; n++ {
		if _, ok := seen[n]; !ok {
			problems = append(problems, fmt.Errorf("no migration numbered %05d: numbers run from 00001 without a gap", n))
		}
	}
	return errors.Join(problems...)
}

func TestCheckNumbering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files []string
		want  string // "" when the names are fine
	}{
		{name: "contiguous", files: []string{"00001_schema.sql", "00002_outbox.sql", "schema.sql", "migrations.go"}},
		{name: "gap", files: []string{"00001_schema.sql", "00003_outbox.sql"}, want: "no migration numbered 00002"},
		{name: "not from one", files: []string{"00002_outbox.sql"}, want: "no migration numbered 00001"},
		{name: "duplicate", files: []string{"00001_schema.sql", "00002_outbox.sql", "00002_inbox.sql"}, want: "the same number"},
		{name: "four digits", files: []string{"0001_schema.sql"}, want: "not named NNNNN_area.sql"},
		{name: "no area", files: []string{"00001.sql"}, want: "not named NNNNN_area.sql"},
		{name: "upper case", files: []string{"00001_Schema.sql"}, want: "not named NNNNN_area.sql"},
		{name: "unnumbered", files: []string{"outbox.sql"}, want: "not named NNNNN_area.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkNumbering(tc.files)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// The migrations in this directory, and those embedded, are numbered 1, 2,
// 3... by area, each with the goose sections that both goose and sqlc read.
func TestMigrationsAreNumberedWithoutGaps(t *testing.T) {
	t.Parallel()
	dir, err := os.ReadDir(".")
	require.NoError(t, err)
	var onDisk []string
	for _, e := range dir {
		onDisk = append(onDisk, e.Name())
	}
	require.NoError(t, checkNumbering(onDisk))

	embedded, err := fs.Glob(migrations.FS, "*")
	require.NoError(t, err)
	require.NotEmpty(t, embedded)
	require.NoError(t, checkNumbering(embedded))
	for _, name := range onDisk {
		if fileName.MatchString(name) {
			require.Contains(t, embedded, name, "every migration is embedded")
		}
	}

	for _, name := range embedded {
		body, err := fs.ReadFile(migrations.FS, name)
		require.NoError(t, err)
		text := string(body)
		require.True(t, strings.HasPrefix(text, "-- +goose Up\n"), "%s starts with -- +goose Up", name)
		require.Equal(t, 1, strings.Count(text, "\n-- +goose Down\n"), "%s has one -- +goose Down", name)
		require.Equal(t, strings.Count(text, "-- +goose StatementBegin"), strings.Count(text, "-- +goose StatementEnd"),
			"%s: every StatementBegin has its StatementEnd", name)
	}
}
