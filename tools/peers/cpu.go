package main

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

// River's CPU is measured as the console bench measures its own
// (internal/bench/cpu.go), so that the two `cpu` objects compare.

const cpuMethod = "CPU time (user+system) over the measured phase only: this process from getrusage (the River " +
	"client, nothing else runs in it meanwhile), and PostgreSQL's processes from /proc/<pid>/stat: the backends of " +
	"River's database and the server's background processes, as listed by pg_stat_activity at the start and the " +
	"end; 0 where /proc is not readable"

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

type cpu struct {
	GoMsPer1k       float64 `json:"go_ms_per_1k_messages"`
	PostgresMsPer1k float64 `json:"postgres_ms_per_1k_messages"`
	TotalMsPer1k    float64 `json:"total_ms_per_1k_messages"`
	Method          string  `json:"method"`
}

type cpuSample struct {
	self     time.Duration
	postgres map[int]time.Duration
}

func sampleCPU(ctx context.Context, pool *pgxpool.Pool) (cpuSample, error) {
	s := cpuSample{postgres: map[int]time.Duration{}}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s, fmt.Errorf("getrusage: %w", err)
	}
	s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE (datname = current_database() OR datname IS NULL) AND pid <> pg_backend_pid()`)
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
	_, rest, ok := strings.Cut(string(b), ") ") // after the command name
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

// cpuSince is the CPU used between two samples per 1,000 messages.
func cpuSince(start, end cpuSample, messages int) cpu {
	var postgres time.Duration
	for pid, t := range end.postgres {
		postgres += t - start.postgres[pid]
	}
	per1k := func(d time.Duration) float64 {
		return float64(int64(float64(d.Milliseconds())*10000/float64(messages)+0.5)) / 10
	}
	self := end.self - start.self
	return cpu{GoMsPer1k: per1k(self), PostgresMsPer1k: per1k(postgres), TotalMsPer1k: per1k(self + postgres), Method: cpuMethod}
}
