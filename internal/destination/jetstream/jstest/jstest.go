// Package jstest starts an in-process NATS server with JetStream for
// tests, so that no test depends on a server someone else started (and
// none skips for want of one).
package jstest

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a running in-process NATS server with JetStream.
type Server struct {
	// URL is its client URL (nats://127.0.0.1:port).
	URL string
	srv *server.Server
	dir string
}

// Start starts a server on a free loopback port, storing in a new
// temporary directory. Call Stop when done.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "switchyard-nats-")
	if err != nil {
		return nil, fmt.Errorf("nats store directory: %w", err)
	}
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		os.RemoveAll(dir)
		return nil, errors.New("nats server not ready within 30s")
	}
	return &Server{URL: srv.ClientURL(), srv: srv, dir: dir}, nil
}

// Stop shuts the server down, waits for it and removes its store.
func (s *Server) Stop() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	os.RemoveAll(s.dir)
}

// New starts a server for one test, stopped in its cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}
