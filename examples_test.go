package switchyard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// TestExampleOrderService builds and runs the example order service's own
// test (examples/orders, a module of its own that imports only the public
// packages) against a database of this test's, so that CI proves the
// example works with the API as it is.
func TestExampleOrderService(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	cmd := exec.Command(goBin, "test", "-count=1", "./...")
	cmd.Dir = filepath.Join("examples", "orders")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.NewURL(t), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	t.Logf("go test ./... in examples/orders:\n%s", out)
	if err != nil {
		t.Fatalf("the example's test failed: %v", err)
	}
}
