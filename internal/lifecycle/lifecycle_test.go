package lifecycle

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type key struct{}

// The loop outlives its start context's cancellation, keeps its values,
// ends at Stop, and starts again after it; a second Start while running
// and a second Stop are refused and harmless.
func TestStartRunsUntilStop(t *testing.T) {
	t.Parallel()
	var l Loop
	require.False(t, l.Stop(), "never started")
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	started, ended := make(chan any, 1), make(chan struct{})
	require.NoError(t, l.Start(ctx, "svc", func(ctx context.Context) {
		started <- ctx.Value(key{})
		<-ctx.Done()
		close(ended)
	}))
	require.Equal(t, "v", <-started)
	cancel()
	require.ErrorContains(t, l.Start(context.Background(), "svc", func(context.Context) {}), "svc: already started")
	select {
	case <-ended:
		t.Fatal("the loop ended with its start context")
	default:
	}
	require.True(t, l.Stop())
	<-ended
	require.False(t, l.Stop())
	ran := make(chan struct{})
	require.NoError(t, l.Start(context.Background(), "svc", func(context.Context) { close(ran) }))
	<-ran
	require.True(t, l.Stop())
}
