package bench

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// memorySample is this process's memory at one moment.
type memorySample struct {
	rss    int64 // VmRSS
	heap   int64 // bytes of heap objects (after a collection: the live ones)
	stacks int64 // bytes of goroutine stacks
}

// settledMemory samples this process's memory at rest, as an idle server
// holds it: collections first (each shrinks an idle goroutine's grown
// stack by half at most; the runtime's own periodic collections do the
// same over the minutes a server idles), then the freed pages go back to
// the system, so that RSS counts what is held, not what the heap's goal
// (GOGC) lets the runtime keep for new allocations; then until two
// samples a second apart agree within 1% (at most 10 s), so that the
// work of the clients' arrival (fan-outs of their presence, writes in
// flight) has ended.
func settledMemory() memorySample {
	prev := sampleMemory()
	for range 10 {
		time.Sleep(time.Second) // a bench's pacing, not a test waiting for a signal
		cur := sampleMemory()
		if d := cur.rss - prev.rss; d*100 <= prev.rss && -d*100 <= prev.rss {
			return cur
		}
		prev = cur
	}
	return prev
}

func sampleMemory() memorySample {
	for range 4 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return memorySample{rss: rss(), heap: int64(s[0].Value.Uint64()), stacks: int64(s[1].Value.Uint64())}
}

// writeHeapProfile writes this process's heap profile (in-use and
// allocated) to path; "" writes none.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
