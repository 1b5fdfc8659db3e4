// Package testwait is the one way tests wait for something: a condition
// or a signal, with a deadline, failing with a message that says what was
// awaited. Tests never sleep for a fixed time hoping that something has
// happened; they wait for it to be observable, and no longer than limit.
package testwait

import (
	"sync"
	"testing"
	"time"
)

// pollEvery is how often Until checks its condition: often enough that a
// test waits little past the moment the condition holds, rarely enough
// that a condition reading the database costs nothing noticeable.
const pollEvery = 10 * time.Millisecond

// Until checks cond at once and then every few milliseconds until it
// returns true, and fails the test (FailNow, so from the test's goroutine
// only) if limit passes first: "timed out after <limit> waiting for
// <what>". cond runs on the caller's goroutine, so it may use require.
func Until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilEvery(t, limit, pollEvery, what, cond)
}

// UntilEvery is Until checking cond every interval: for a condition that
// costs real work (a request through a console process, say) and is
// awaited for seconds, where checking it every few milliseconds would
// spend more CPU than the work it waits for.
func UntilEvery(t testing.TB, limit, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		case <-tick.C:
		}
	}
}

// For waits until ch delivers (or is closed) and returns what it
// delivered, or fails the test if limit passes first.
func For[T any](t testing.TB, limit time.Duration, what string, ch <-chan T) T {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	select {
	case v := <-ch:
		return v
	case <-deadline.C:
		t.Fatalf("timed out after %v waiting for %s", limit, what)
	}
	panic("unreachable")
}

// Together runs f(0), …, f(n-1), each in a goroutine of its own, and
// returns when every one has returned. Concurrency tests use it to make
// their goroutines race for the same rows or locks: a race needs its
// contenders released together, not started one after another, or the
// first may be done before the last is launched and nothing is contended.
// So Together launches all n goroutines first, each waiting on one
// channel, and then closes it; when each then runs is up to the scheduler.
// f runs off the test's goroutine, so it reports failures with t.Error,
// not t.Fatal or require.
func Together(n int, f func(i int)) {
	together(n, f, func() {})
}

// together is Together calling launched after launching each goroutine,
// so that its test can see that no f starts before the last launch.
func together(n int, f func(i int), launched func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
		launched()
	}
	close(start)
	wg.Wait()
}
