package bench

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/pgembed"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// dataParent returns a directory the postgres account can traverse when the
// tests run as root (t.TempDir's directories are private to us).
func dataParent(t *testing.T) string {
	t.Helper()
	dir, err := pgembed.MkdirTemp("bench-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
