package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMethod says how benchCPU is measured, for the JSON line.
const cpuMethod = "CPU time (user+system) over the measured phase only: the bench process from getrusage, " +
	"and PostgreSQL's processes from /proc/<pid>/stat: the backends of the bench's database and the server's " +
	"background processes (walwriter, checkpointer, ...), as listed by pg_stat_activity at the start and the end " +
	"(a backend that started and ended within the phase is missed); 0 where /proc is not readable. " +
	"Unlike a rate, CPU per message moves little when other work shares the machine"

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// benchCPU is the CPU the measured phase cost, per 1,000 messages.
type benchCPU struct {
	GoMsPer1k       float64 `json:"go_ms_per_1k_messages"`
	PostgresMsPer1k float64 `json:"postgres_ms_per_1k_messages"`
	TotalMsPer1k    float64 `json:"total_ms_per_1k_messages"`
	Method          string  `json:"method"`
}

// cpuSample is the CPU time used so far by this process and by each
// PostgreSQL process serving the bench.
type cpuSample struct {
	self     time.Duration
	postgres map[int]time.Duration
}

// sampleCPU reads this process's CPU time and that of the server processes
// pg_stat_activity lists for the bench's database and for none (the
// background processes). The server's processes are readable only when it
// runs on this machine as a user whose /proc entries we may read; where
// they are not, they count as zero.
//
// The backend that runs the listing is listed too: the pool may hand each
// sample a different one, and a backend left out of the first sample but
// listed in the second would count whole, whatever it did before the phase
// (the seeding of a history: minutes of CPU read as the drain's).
func sampleCPU(ctx context.Context, pool *pgxpool.Pool) (cpuSample, error) {
	s := cpuSample{postgres: map[int]time.Duration{}}
	self, err := selfCPU()
	if err != nil {
		return s, err
	}
	s.self = self
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() OR datname IS NULL`)
	if err != nil {
		return s, fmt.Errorf("list the server's processes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return s, err
		}
		if t, ok := procCPU(pid); ok {
			s.postgres[pid] = t
		}
	}
	return s, rows.Err()
}

// procCPU is a process's user plus system time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after its closing parenthesis start at field 3 (state).
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0, false
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// since is the CPU used between start and end: this process's, and the
// server processes'. A server process absent from start began during the
// phase: all its time counts.
func (end cpuSample) since(start cpuSample) (self, postgres time.Duration) {
	for pid, t := range end.postgres {
		postgres += t - start.postgres[pid]
	}
	return end.self - start.self, postgres
}

// cpuSince is the CPU used between two samples, per 1,000 of messages.
func cpuSince(start, end cpuSample, messages int) benchCPU {
	self, postgres := end.since(start)
	per1k := func(d time.Duration) float64 {
		if messages == 0 {
			return 0
		}
		return benchRound(float64(d.Milliseconds())*1000/float64(messages), 1)
	}
	return benchCPU{GoMsPer1k: per1k(self), PostgresMsPer1k: per1k(postgres), TotalMsPer1k: per1k(self + postgres), Method: cpuMethod}
}

// selfCPU is this process's CPU time (user + system) so far.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// clusterSample is the CPU time the whole server has used so far: the
// postmaster's and its children's, the live ones from their /proc
// entries, the ended ones through the postmaster's times of reaped
// children. Unlike cpuSample it counts a process that starts and ends
// between two samples (pgbench's backends), and every database's.
type clusterSample struct {
	total time.Duration
	ok    bool // false where /proc does not show the server
}

func (end clusterSample) since(start clusterSample) time.Duration {
	if !end.ok || !start.ok {
		return 0
	}
	return end.total - start.total
}

// sampleClusterCPU finds the postmaster (the parent of this pool's
// backend) and sums its and its children's CPU time. Where /proc does not
// show the server (another machine, processes we may not read), ok is
// false.
//
// The sum must be one moment's: a child reaped between reading the
// postmaster's times of reaped children and reading the child's own entry
// would be counted in neither, and the total would fall (the CPU of a
// backend of any database ends up missing: in a shared cluster other
// clients' backends end all the time). So the children, listed first, are
// read between two readings of the postmaster, and again while those
// differ: a reap in between changes the postmaster's children's times. A
// child started after the listing is left to the next sample: it has had
// no time to spend.
func sampleClusterCPU(ctx context.Context, pool *pgxpool.Pool) (clusterSample, error) {
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return clusterSample{}, fmt.Errorf("find the server's processes: %w", err)
	}
	b, ok := readProcStat(backend)
	if !ok {
		return clusterSample{}, nil
	}
	postmaster := b.ppid
	for range clusterSampleTries {
		if err := ctx.Err(); err != nil {
			return clusterSample{}, err
		}
		children, ok := childrenOf(postmaster)
		if !ok {
			return clusterSample{}, nil
		}
		before, ok := readProcStat(postmaster)
		if !ok {
			return clusterSample{}, nil
		}
		total := before.self + before.children
		for _, pid := range children {
			// One that ended and was reaped since the listing is gone
			// from /proc, and its time is in the postmaster's.
			if st, ok := readProcStat(pid); ok && st.ppid == postmaster {
				total += st.self + st.children
			}
		}
		after, ok := readProcStat(postmaster)
		if !ok {
			return clusterSample{}, nil
		}
		if after.children == before.children {
			return clusterSample{total: total, ok: true}, nil
		}
	}
	return clusterSample{}, fmt.Errorf("count the server's CPU: its processes kept ending while read, %d times", clusterSampleTries)
}

// clusterSampleTries bounds sampleClusterCPU's rereads: reading the
// children's entries takes well under a millisecond, backends end far less
// often than that.
const clusterSampleTries = 100

// childrenOf lists the processes whose parent is parent.
func childrenOf(parent int) ([]int, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	var children []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.ppid == parent {
			children = append(children, pid)
		}
	}
	return children, true
}

// procStat is what /proc/<pid>/stat says of a process's parent and time.
type procStat struct {
	ppid     int
	self     time.Duration // utime + stime
	children time.Duration // cutime + cstime: its reaped children's
}

func readProcStat(pid int) (procStat, bool) {
	if pid <= 0 {
		return procStat{}, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return procStat{}, false
	}
	f := strings.Fields(rest) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, false
	}
	var n [5]int64
	for i, field := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[field], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		n[i] = v
	}
	tick := func(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }
	return procStat{ppid: int(n[0]), self: tick(n[1] + n[2]), children: tick(n[3] + n[4])}, true
}
