package testwait

import (
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
