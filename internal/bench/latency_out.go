package bench

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"time"
)

// stallWindow is the width of the windows, by COMMIT time, that
// commit_p99_windows counts. Under offered load the slowest messages came
// in bursts: at 1,000 a second, one claim that took 30 ms kept everything
// committed in the 50 to 90 ms before it waiting, and two such bursts held
// nearly all of a run's messages over the p99 (BENCHMARKS.md, "The p99 is
// a few stalls").
const stallWindow = 100 * time.Millisecond

// committedLatency is an offered message's COMMIT time and its time from
// there to its delivery.
type committedLatency struct {
	index     int
	committed time.Time
	latency   time.Duration
}

// committedLatencies returns, in commit order, each offered message from
// first to end-1 that was delivered, with when its COMMIT returned
// (committedAt) and its time from there to its delivery.
func (r *deliveryRecorder) committedLatencies(committedAt []time.Time, first, end int) []committedLatency {
	out := make([]committedLatency, 0, end-first)
	r.eachDelivered(committedAt, first, end, func(i int, d time.Duration) {
		out = append(out, committedLatency{index: i, committed: committedAt[i], latency: d})
	})
	slices.SortStableFunc(out, func(a, b committedLatency) int { return a.committed.Compare(b.committed) })
	return out
}

// slowWindows counts the windows of width w (from the Unix epoch on) whose
// messages, by COMMIT time, include one at or over slow: the number of
// separate times at which messages were that slow, at most.
func slowWindows(ls []committedLatency, slow, w time.Duration) int {
	if slow <= 0 || w <= 0 {
		return 0
	}
	windows := map[int64]struct{}{}
	for _, l := range ls {
		if l.latency >= slow {
			windows[l.committed.UnixNano()/int64(w)] = struct{}{}
		}
	}
	return len(windows)
}

// writeLatencies writes ls to path as CSV, with a header: the message's
// index, its COMMIT time in Unix nanoseconds and its time to delivery in
// microseconds.
func writeLatencies(path string, ls []committedLatency) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--latency-out: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("--latency-out: %w", cerr)
		}
	}()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "message,committed_unix_ns,commit_to_delivered_us")
	for _, l := range ls {
		fmt.Fprintf(w, "%d,%d,%d\n", l.index, l.committed.UnixNano(), l.latency.Microseconds())
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("--latency-out: %w", err)
	}
	return nil
}
