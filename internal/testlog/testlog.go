// Package testlog gives tests a logger that writes to t.Log, so that the
// components a failing test ran show what they did next to the failure
// (and nothing when the test passes, unless -v).
package testlog

import (
	"log/slog"
	"strings"
	"testing"
)

// New returns a logger writing each record to t's log, at Debug level.
// Records logged after the test ended are dropped (a component still
// stopping), instead of panicking.
func New(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(writer{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Helper()
	defer func() {
		// testing panics on Log after the test completed.
		_ = recover()
	}()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
