package jetstream_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"
)

// natsURL is the test binary's own NATS server with JetStream (TestMain):
// the tests never depend on a server someone else started, so they never
// skip.
var natsURL string

// TestMain runs the tests against an in-process NATS server with
// JetStream, storing in a temporary directory, on a free port; then
// checks that nothing leaked once the server has shut down.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "switchyard-nats-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats store directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats server:", err)
		return 1
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		fmt.Fprintln(os.Stderr, "nats server not ready within 30s")
		return 1
	}
	natsURL = srv.ClientURL()
	code := m.Run()
	srv.Shutdown()
	srv.WaitForShutdown()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
