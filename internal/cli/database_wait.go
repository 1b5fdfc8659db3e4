package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/switchyard/switchyard/internal/backoff"
	"github.com/switchyard/switchyard/internal/postgres"
)

// waitForever is databaseWait's limit for "forever".
const waitForever time.Duration = -1

// databaseWait is how a command waits at start for a database it cannot
// reach: it tries again after a capped exponential backoff with jitter,
// and logs once per logEvery, not once per attempt, so a database that is
// down for an hour costs a few log lines and a trickle of connection
// attempts.
type databaseWait struct {
	// limit is how long to keep trying; 0: one attempt, its error
	// returned as it is; waitForever: until ctx ends.
	limit time.Duration
	// base and ceiling bound the pause between attempts: it doubles from
	// base up to ceiling, and each is drawn from [half, all] of its bound
	// (so processes that lost the database together do not come back in
	// step, and none comes back at once in a tight loop).
	base, ceiling time.Duration
	// logEvery is the attempt window: the first failure is logged, then
	// one line per window with the attempts made in it.
	logEvery time.Duration
	// rnd draws the jitter; nil: math/rand/v2.
	rnd func() float64
}

// defaultDatabaseWait is the pace every command waits at.
func defaultDatabaseWait(limit time.Duration) databaseWait {
	return databaseWait{limit: limit, base: 500 * time.Millisecond, ceiling: 10 * time.Second, logEvery: 30 * time.Second}
}

// parseDatabaseWait reads --database-wait: a duration of 0 or more, or
// "forever"; "" is the command's default (dispatch: forever; the rest:
// 0, the first failure is final).
func parseDatabaseWait(command, value string) (time.Duration, error) {
	switch strings.TrimSpace(value) {
	case "":
		if command == "dispatch" {
			return waitForever, nil
		}
		return 0, nil
	case "forever":
		return waitForever, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid database wait %q: want a duration such as 2m (0: do not wait) or forever", value)
	}
	return d, nil
}

// await calls start until it succeeds, fails for a reason other than an
// unreachable database (postgres.Unavailable), w.limit has passed, or ctx
// ends (then it returns ctx's error). start must release whatever it
// opened when it fails; when ctx ends just as start succeeds, await
// returns ctx's error all the same, and the caller releases it.
func (w databaseWait) await(ctx context.Context, logger *slog.Logger, start func(context.Context) error) error {
	if w.limit == 0 {
		return start(ctx)
	}
	policy := backoff.Policy{Base: w.base, Cap: w.ceiling}
	rnd := w.rnd
	if rnd == nil {
		rnd = rand.Float64
	}
	began := time.Now()
	var logged time.Time
	sinceLog := 0
	for attempt := 1; ; attempt++ {
		err := start(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			if attempt > 1 {
				logger.Info("database reachable", slog.Int("attempts", attempt), slog.Duration("waited", time.Since(began).Round(time.Millisecond)))
			}
			return nil
		}
		if !postgres.Unavailable(err) || w.limit > 0 && time.Since(began) >= w.limit {
			return err
		}
		ceiling := policy.Ceiling(attempt)
		pause := ceiling/2 + time.Duration(rnd()*float64(ceiling/2))
		if w.limit > 0 {
			pause = min(pause, w.limit-time.Since(began))
		}
		sinceLog++
		switch {
		case attempt == 1:
			logger.Warn("waiting for the database", slog.Any("error", err), slog.Duration("retry_in", pause.Round(time.Millisecond)))
			logged, sinceLog = time.Now(), 0
		case time.Since(logged) >= w.logEvery:
			logger.Warn("still waiting for the database", slog.Any("error", err), slog.Int("attempts", attempt),
				slog.Int("attempts_since_last_log", sinceLog), slog.Duration("waited", time.Since(began).Round(time.Second)))
			logged, sinceLog = time.Now(), 0
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
