package service

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

type key struct{}

// A service runs until Stop, not until the starter's context ends; it
// keeps that context's values; a second Start is refused, also after
// Stop; Stop waits for run and may be called any number of times.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	var l Lifecycle
	require.False(t, l.Stop(), "before Start: nothing to stop")
	require.False(t, l.Started())

	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	running, finished := make(chan any, 1), make(chan struct{})
	err := l.Start(parent, nil, func(ctx context.Context) {
		running <- ctx.Value(key{})
		<-ctx.Done()
		close(finished)
	})
	require.NoError(t, err)
	require.True(t, l.Started())
	require.Equal(t, "v", <-running)
	cancelParent()
	select {
	case <-finished:
		t.Fatal("run ended with the starter's context, before Stop")
	default:
	}
	require.ErrorIs(t, l.Start(context.Background(), nil, func(context.Context) {}), ErrStarted)

	var firsts atomic.Int32
	testwait.Together(3, func(int) {
		if l.Stop() {
			firsts.Add(1)
		}
		select {
		case <-finished:
		default:
			t.Error("Stop returned before run did")
		}
	})
	require.EqualValues(t, 1, firsts.Load(), "exactly one Stop reports that it stopped the service")
	require.False(t, l.Stop())
	require.ErrorIs(t, l.Start(context.Background(), nil, func(context.Context) {}), ErrStarted, "a stopped service is not restarted")
}

// A failed setup leaves the service unstarted, and run never runs.
func TestLifecycleSetupFailure(t *testing.T) {
	t.Parallel()
	var l Lifecycle
	boom := errors.New("boom")
	ran := make(chan struct{}, 1)
	run := func(context.Context) { ran <- struct{}{} }
	require.ErrorIs(t, l.Start(context.Background(), func(context.Context) error { return boom }, run), boom)
	require.False(t, l.Started())
	l.Stop()
	require.NoError(t, l.Start(context.Background(), func(context.Context) error { return nil }, run))
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not run after a successful Start")
	}
	l.Stop()
}
