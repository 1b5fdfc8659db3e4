package testwait

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB whose Fatalf records instead of failing.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	// FailNow's runtime.Goexit, without ending the real test.
	panic(r)
}

func catch(r *recorder, f func()) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f()
}

func TestUntil(t *testing.T) {
	t.Parallel()
	n := 0
	Until(t, time.Minute, "three checks", func() bool { n++; return n == 3 })
	require.Equal(t, 3, n)

	r := &recorder{TB: t}
	catch(r, func() { Until(r, 30*time.Millisecond, "never", func() bool { return false }) })
	require.Equal(t, "timed out after %v waiting for %s", r.failed)
}

func TestUntilEvery(t *testing.T) {
	t.Parallel()
	n := 0
	start := time.Now()
	UntilEvery(t, time.Minute, 20*time.Millisecond, "three checks", func() bool { n++; return n == 3 })
	require.Equal(t, 3, n)
	require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "two intervals between three checks")

	r := &recorder{TB: t}
	catch(r, func() { UntilEvery(r, 30*time.Millisecond, 10*time.Millisecond, "never", func() bool { return false }) })
	require.Equal(t, "timed out after %v waiting for %s", r.failed)
}

func TestFor(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, For(t, time.Minute, "a value", ch))

	r := &recorder{TB: t}
	catch(r, func() { For(r, 30*time.Millisecond, "nothing", make(chan int)) })
	require.Equal(t, "timed out after %v waiting for %s", r.failed)
}

// Together runs each index once, all n at once (each f waits until all
// have started, which cannot happen if they run one after another), none
// before the last goroutine is launched, and returns after the last f.
func TestTogether(t *testing.T) {
	t.Parallel()
	const n = 50
	var launched, arrived atomic.Int64
	everyone := make(chan struct{})
	wait, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	runs := make([]atomic.Int64, n)
	returned := make([]atomic.Bool, n)
	together(n, func(i int) {
		if l := launched.Load(); l != n {
			t.Errorf("f(%d) started after %d of %d launches", i, l, n)
		}
		runs[i].Add(1)
		if arrived.Add(1) == n {
			close(everyone)
		}
		select {
		case <-everyone:
		case <-wait.Done():
			t.Errorf("f(%d) waited a minute for the other goroutines", i)
		}
		returned[i].Store(true)
	}, func() {
		launched.Add(1)
		// Let a goroutine run now if it is not held back until the end.
		runtime.Gosched()
	})
	for i := range n {
		require.Equal(t, int64(1), runs[i].Load(), "runs of f(%d)", i)
		require.True(t, returned[i].Load(), "Together returned before f(%d)", i)
	}
	Together(0, func(i int) { t.Errorf("f(%d) ran for n = 0", i) })
}
