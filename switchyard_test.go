package switchyard_test

import (
	"context"
	"os"
	"testing"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// TestMain gives the package's runnable examples, which have no
// testing.T, one migrated database of their own in DATABASE_URL; the
// tests get one each (dbtest.New).
func TestMain(m *testing.M) {
	dbtest.MainWith(m, func() (func(), error) {
		url, drop, err := dbtest.NewUnmanagedURL(context.Background())
		if err != nil {
			return nil, err
		}
		if err := os.Setenv("DATABASE_URL", url); err != nil {
			return nil, err
		}
		return func() { _ = drop() }, nil
	})
}
