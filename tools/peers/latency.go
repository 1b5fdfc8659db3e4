package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"
)

// latencyRun is one offered-load run's outcome: from each message's (job's)
// enqueuing COMMIT returning to its delivery (its worker starting).
type latencyRun struct {
	Messages       int     `json:"messages"`
	EnqueuedPerSec float64 `json:"enqueued_per_sec"` // below the offered rate when the enqueuers fall behind
	P50Ms          float64 `json:"commit_p50_ms"`
	P99Ms          float64 `json:"commit_p99_ms"`
	EnqueueP99Ms   float64 `json:"enqueue_p99_ms"` // the enqueuing transactions alone, BEGIN to COMMIT returned
	// From each enqueuing transaction's start to the delivery: what a
	// NOTIFY inside the transaction (River's) adds to the commit counts
	// here too. Switchyard's is its bench's p99_ms.
	P99FromBeginMs float64 `json:"begin_p99_ms"`
	// The warm-up's messages (--warmup-seconds), offered just before and
	// left out of the figures above: their P99Ms. Not like for like:
	// Switchyard's include its new process and database, River's follow a
	// client started and warmed with one job, on a pool kept from the
	// rounds before.
	WarmupP99Ms float64 `json:"warmup_commit_p99_ms,omitempty"`
	// P99Windows is how many windows of 100 ms, by COMMIT time, hold the
	// messages at or over P99Ms (slowWindows; Switchyard's is its bench's
	// commit_p99_windows): one or two when the p99 was set by as many
	// stalls, about as many as those messages when every message risks it.
	P99Windows int `json:"commit_p99_windows"`
	// CPU per message over the timed phase, enqueues included, measured
	// the same way on both sides (cpu.go).
	CPU cpu `json:"cpu"`
}

// latencySeries is one configuration's offered-load runs and their medians.
type latencySeries struct {
	Runs           []latencyRun `json:"runs"`
	P50Ms          float64      `json:"commit_p50_ms"`
	P99Ms          float64      `json:"commit_p99_ms"`
	P99FromBeginMs float64      `json:"begin_p99_ms"`
	// The server's CPU per 1,000 messages, the median of the runs.
	PostgresMsPer1k float64 `json:"postgres_ms_per_1k_messages"`
	// EnqueuedPerSec is the median of the runs' enqueue rates: the load
	// this configuration actually took.
	EnqueuedPerSec float64 `json:"enqueued_per_sec"`
}

func (s *latencySeries) summarize() {
	var p50, p99, begin, server, enqueued []float64
	for _, r := range s.Runs {
		p50, p99, begin = append(p50, r.P50Ms), append(p99, r.P99Ms), append(begin, r.P99FromBeginMs)
		server, enqueued = append(server, r.CPU.PostgresMsPer1k), append(enqueued, r.EnqueuedPerSec)
	}
	s.P50Ms, s.P99Ms, s.P99FromBeginMs, s.PostgresMsPer1k = median(p50), median(p99), median(begin), median(server)
	s.EnqueuedPerSec = median(enqueued)
}

// tookLoad is the share of the offered rate a configuration must enqueue
// (its median) for its latency to count as its side's best: a cooldown
// whose fetches (River's) or claims (Switchyard's) take the CPU its own
// enqueuers need answers fast because it was offered less (at 5,000 a
// second, 1 ms enqueued 1,160–1,602 a second with a p99 of 10–11 ms,
// while 5 ms enqueued 2,673–3,052 with one of 437–745 ms; BENCHMARKS.md).
const tookLoad = 0.95

// bestCooldown is a side's best cooldown (River's FetchCooldown,
// Switchyard's wake-up cooldown), series holding each one's runs: the
// lowest median p99 among those that took the offered load, or, when none
// did, the one that took the most of it (took is then false).
func bestCooldown(series map[string]*latencySeries, cooldowns []time.Duration, rate int) (best string, took bool) {
	for _, c := range cooldowns {
		s := series[c.String()]
		ok := s.EnqueuedPerSec >= tookLoad*float64(rate)
		if best == "" || better(s, ok, series[best], took) {
			best, took = c.String(), ok
		}
	}
	return best, took
}

// better reports whether series a (ok: it took the load) is better than
// b: one that took the load beats one that did not; of two that did, the
// lower p99 wins; of two that did not, the larger load.
func better(a *latencySeries, aOK bool, b *latencySeries, bOK bool) bool {
	switch {
	case aOK != bOK:
		return aOK
	case aOK:
		return a.P99Ms < b.P99Ms
	default:
		return a.EnqueuedPerSec > b.EnqueuedPerSec
	}
}

// latencyResult is the JSON object printed last with --rate.
type latencyResult struct {
	Rate              int    `json:"offered_per_sec"`
	Seconds           int    `json:"seconds"`
	WarmupSeconds     int    `json:"warmup_seconds"`
	Enqueuers         int    `json:"enqueuers"`
	Rounds            int    `json:"rounds"`
	RiverVersion      string `json:"river_version"`
	RiverWorkers      int    `json:"river_workers"`
	RiverBestCooldown string `json:"river_best_fetch_cooldown"`
	// RiverTookLoad says that the best cooldown enqueued at least 95 % of
	// the offered rate (see bestCooldown); false, no River cooldown did.
	RiverTookLoad  bool   `json:"river_best_took_load"`
	SwitchyardWake string `json:"switchyard_wake"`
	// Switchyard's best wake-up cooldown for each kind, chosen as River's
	// is (bestCooldown); the figures and ratios below are at it.
	OrderedBestCooldown   string  `json:"switchyard_ordered_best_wake_cooldown"`
	UnorderedBestCooldown string  `json:"switchyard_unordered_best_wake_cooldown"`
	RiverP99Ms            float64 `json:"river_commit_p99_ms"`
	OrderedP99Ms          float64 `json:"switchyard_ordered_commit_p99_ms"`
	UnorderedP99Ms        float64 `json:"switchyard_unordered_commit_p99_ms"`
	RatioOrdered          float64 `json:"ratio_ordered_p99_to_river"` // below 1: Switchyard's p99 is the shorter
	RatioUnordered        float64 `json:"ratio_unordered_p99_to_river"`
	// The server's CPU per message, Switchyard's median over River's at
	// its best cooldown: what a 2-core machine's queueing makes latency of.
	ServerCPURatioOrdered   float64                   `json:"server_cpu_ratio_ordered_to_river"`
	ServerCPURatioUnordered float64                   `json:"server_cpu_ratio_unordered_to_river"`
	River                   map[string]*latencySeries `json:"river"`                // by FetchCooldown
	Ordered                 map[string]*latencySeries `json:"switchyard_ordered"`   // by wake-up cooldown
	Unordered               map[string]*latencySeries `json:"switchyard_unordered"` // by wake-up cooldown
	runContext
	LoadAverageByRun []string `json:"load_average_by_run"`
}

const latencyMethod = "offered load, each round runs every configuration once, rotating which goes first; " +
	"both sides enqueue rate × (warmup_seconds + seconds) messages, message i at start + i/rate, each in a transaction of its own on one of " +
	"--enqueuers connections (16 unless given), and time each of the last rate × seconds (the first warmup_seconds are a warm-up, untimed; their own p99 is warmup_commit_p99_ms) " +
	"from its COMMIT returning to its delivery (0 if the delivery came first) and from its transaction's start; River: a " +
	"fresh client (one queue of --river-workers, FetchCooldown as named, FetchPollInterval the larger of it and 1 s), " +
	"warmed with one job, jobs inserted with InsertTx (River's own insert notification), latency to the worker's start; " +
	"Switchyard: `console bench dispatch --rate R --warmup-seconds WS --seconds S --wake W --wake-cooldown C [--aggregates 0]` for each C of --switchyard-wake-cooldowns (W: shared, an outbox.Notifier, which paces the NOTIFYs the enqueuers send after their commits to at most one per 5 ms, the bound River's insert limiter sets on its own at a 5 ms FetchCooldown; or notify, one after every commit), " +
	"its commit_p50_ms and commit_p99_ms, and p99_ms (from the enqueuing transaction's start) as begin_p99_ms; figures are medians of the rounds, River's best is the cooldown with the " +
	"lowest median p99 among those whose median enqueue rate reached 95 % of the offered rate (river_best_took_load; " +
	"if none did, the one that enqueued the most), Switchyard's best wake-up cooldown for each kind is chosen the same way (switchyard_*_best_wake_cooldown), ratios are Switchyard's median p99 at it / River's best; cpu per run over the timed phase, enqueues included " +
	"(River's measured by this process as the console bench measures Switchyard's), server_cpu_ratio_* Switchyard's median server CPU per message at its best cooldown / River's at its best cooldown"

// latencyConfig is one of the offered-load runs a round runs.
type latencyConfig struct {
	name       string
	river      bool
	cooldown   time.Duration // River's FetchCooldown, Switchyard's --wake-cooldown
	aggregates int           // Switchyard's --aggregates
}

// measureLatency runs the offered-load comparison (--rate).
func measureLatency(ctx context.Context, o options, url string, throwaway bool) (*latencyResult, error) {
	enqueuers := o.enqueuers
	admin, err := connect(ctx, url, 2)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	where, err := checkServer(ctx, admin, throwaway, latencyMethod)
	if err != nil {
		return nil, err
	}
	river, err := openRiverTarget(ctx, admin, url, o.riverConns, enqueuers)
	if err != nil {
		return nil, err
	}
	defer river.close()

	var configs []latencyConfig
	for _, c := range o.riverCooldowns {
		configs = append(configs, latencyConfig{name: "river-cooldown-" + c.String(), river: true, cooldown: c})
	}
	for _, c := range o.wakeCooldowns {
		configs = append(configs,
			latencyConfig{name: "switchyard-ordered-cooldown-" + c.String(), cooldown: c, aggregates: 1000},
			latencyConfig{name: "switchyard-unordered-cooldown-" + c.String(), cooldown: c, aggregates: 0})
	}
	r := &latencyResult{Rate: o.rate, Seconds: o.seconds, WarmupSeconds: o.warmup, Enqueuers: enqueuers, Rounds: o.rounds,
		RiverVersion: riverVersion(), RiverWorkers: o.latencyWorkers, SwitchyardWake: o.wake,
		River: map[string]*latencySeries{}, Ordered: map[string]*latencySeries{}, Unordered: map[string]*latencySeries{},
		runContext: where}
	for round := range o.rounds {
		var order []string
		for i := range configs {
			c := configs[(i+round)%len(configs)]
			order = append(order, c.name)
			load := loadAverage()
			r.LoadAverageByRun = append(r.LoadAverageByRun, load)
			fmt.Fprintf(os.Stderr, "peers: round %d/%d: %s at %d/s (load %s)\n", round+1, o.rounds, c.name, o.rate, load)
			var run latencyRun
			series := r.Ordered
			switch {
			case c.river:
				run, err = river.offered(ctx, o.rate, o.warmup, o.seconds, enqueuers, o.latencyWorkers, c.cooldown)
				series = r.River
			default:
				run, err = consoleOffered(ctx, o.console, url, o.rate, o.warmup, o.seconds, enqueuers, c.aggregates, o.wake, c.cooldown)
				if c.aggregates == 0 {
					series = r.Unordered
				}
			}
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round+1, c.name, err)
			}
			fmt.Fprintf(os.Stderr, "peers: round %d/%d: %s: from the commit p50 %.1f ms, p99 %.1f ms (in %d windows of 100 ms); from BEGIN p99 %.1f ms; %.0f enqueued/s; the warm-up's p99 %.1f ms; server CPU %.0f ms per 1,000\n",
				round+1, o.rounds, c.name, run.P50Ms, run.P99Ms, run.P99Windows, run.P99FromBeginMs, run.EnqueuedPerSec, run.WarmupP99Ms, run.CPU.PostgresMsPer1k)
			if series[c.cooldown.String()] == nil {
				series[c.cooldown.String()] = &latencySeries{}
			}
			series[c.cooldown.String()].Runs = append(series[c.cooldown.String()].Runs, run)
		}
		r.Order = append(r.Order, order)
	}
	for _, series := range []map[string]*latencySeries{r.River, r.Ordered, r.Unordered} {
		for _, s := range series {
			s.summarize()
		}
	}
	r.RiverBestCooldown, r.RiverTookLoad = bestCooldown(r.River, o.riverCooldowns, o.rate)
	r.OrderedBestCooldown, _ = bestCooldown(r.Ordered, o.wakeCooldowns, o.rate)
	r.UnorderedBestCooldown, _ = bestCooldown(r.Unordered, o.wakeCooldowns, o.rate)
	bestRiver, ordered, unordered := r.River[r.RiverBestCooldown], r.Ordered[r.OrderedBestCooldown], r.Unordered[r.UnorderedBestCooldown]
	r.RiverP99Ms = bestRiver.P99Ms
	r.OrderedP99Ms, r.UnorderedP99Ms = ordered.P99Ms, unordered.P99Ms
	if r.RiverP99Ms > 0 {
		r.RatioOrdered = round3(r.OrderedP99Ms / r.RiverP99Ms)
		r.RatioUnordered = round3(r.UnorderedP99Ms / r.RiverP99Ms)
	}
	if bestRiver.PostgresMsPer1k > 0 {
		r.ServerCPURatioOrdered = round3(ordered.PostgresMsPer1k / bestRiver.PostgresMsPer1k)
		r.ServerCPURatioUnordered = round3(unordered.PostgresMsPer1k / bestRiver.PostgresMsPer1k)
	}
	return r, nil
}

// offer calls enqueue(i) for i in 0..n-1, i at start + i/rate, on
// enqueuers goroutines: when all of them are busy the schedule slips (the
// run's enqueued_per_sec shows it). The first error stops it. The same
// schedule as the console bench's offered load (internal/bench/load.go),
// which this module cannot import: it keeps River out of the product's
// module and measures Switchyard only through the console binary.
func offer(ctx context.Context, start time.Time, n, rate, enqueuers int, enqueue func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int, enqueuers)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error // set once, read after wg.Wait
	)
	for range enqueuers {
		wg.Go(func() {
			for i := range jobs {
				if err := enqueue(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		})
	}
	err := pace(ctx, start, n, rate, jobs)
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return err
}

// pace hands out message numbers on schedule.
func pace(ctx context.Context, start time.Time, n, rate int, jobs chan<- int) error {
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// percentile of ds by nearest rank, as the console bench computes its
// own; sorts ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[max(0, min(int(math.Ceil(q*float64(len(ds))))-1, len(ds)-1))]
}

func millis(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// parseDurations reads a comma-separated list of positive durations.
func parseDurations(flagName, list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range splitList(list) {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive duration", flagName, f)
		}
		out = append(out, d)
	}
	return out, nil
}

// stallWindow is the width of slowWindows' windows, as in `console bench
// dispatch` (internal/bench/latency_out.go).
const stallWindow = 100 * time.Millisecond

// slowWindows counts the windows of stallWindow (from the Unix epoch on)
// in which a message committed (committedAt[i]) that took slow or longer
// (latencies[i]), as `console bench dispatch` counts its own.
func slowWindows(committedAt []time.Time, latencies []time.Duration, slow time.Duration) int {
	windows := map[int64]struct{}{}
	for i, l := range latencies {
		if slow > 0 && l >= slow {
			windows[committedAt[i].UnixNano()/int64(stallWindow)] = struct{}{}
		}
	}
	return len(windows)
}
