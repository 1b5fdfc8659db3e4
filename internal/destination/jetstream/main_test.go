package jetstream_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/destination/jetstream/jstest"
)

// natsURL is the test binary's own NATS server with JetStream (TestMain):
// the tests never depend on a server someone else started, so they never
// skip.
var natsURL string

// TestMain runs the tests against an in-process NATS server with
// JetStream (jstest), storing in a temporary directory, on a free port;
// then checks that nothing leaked once the server has shut down.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	srv, err := jstest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	natsURL = srv.URL
	code := m.Run()
	srv.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
