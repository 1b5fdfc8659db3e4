package sse

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// A change that commits behind an event the client already has (its
// transaction was open when the event was delivered) is never skipped by a
// resume: the event id remembers the open transaction, and the change is
// replayed, from the ring or from the feed.
func TestResumeNeverSkipsAChangeThatCommittedLate(t *testing.T) {
	t.Parallel()
	for name, ring := range map[string]int{"from memory": 100, "from the feed": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{RingSize: ring})
			ctx := context.Background()
			c := connect(t, b.srv.URL, "", 0)
			require.Equal(t, "ready", c.next(t, 5*time.Second).name)

			late, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer late.Rollback(ctx)
			require.NoError(t, changefeed.Append(ctx, late, changefeed.Change{Kind: "k", Subject: "late"}))
			b.commit(t, "k", "early")
			early := c.next(t, 10*time.Second)
			require.Equal(t, "early", subjectOf(t, early), "delivered while the older transaction is open")
			c.close()

			require.NoError(t, late.Commit(ctx))
			require.NoError(t, changefeed.Notify(ctx, b.pool))
			b.commit(t, "k", "after")
			b.waitCaughtUp(t)

			again := connect(t, b.srv.URL, early.id, 0)
			var got []string
			for range 2 {
				got = append(got, subjectOf(t, again.next(t, 10*time.Second)))
			}
			require.Equal(t, []string{"late", "after"}, got)
			require.Equal(t, "ready", again.next(t, 5*time.Second).name)
		})
	}
}

// The resume window of a filtered stream is the retention, not the ring
// nor the queue: a dead-letter page that was away while thousands of
// statistics changes went by gets exactly its dead letters back.
func TestFilteredStreamResumesAcrossThousandsOfOtherChanges(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RingSize: 16, QueueSize: 256})
	ctx := context.Background()
	url := b.srv.URL + "?kind=" + changefeed.KindDeadLetter
	c := connect(t, url, "", 0)
	require.Equal(t, "ready", c.next(t, 5*time.Second).name)
	b.commit(t, changefeed.KindDeadLetter, "seen")
	seen := c.next(t, 10*time.Second)
	c.close()

	const others = 5000 // twenty queues' worth
	for i := range 2 {
		_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.changes (kind) SELECT 'stats' FROM generate_series(1, $1::int)`, others/2)
		require.NoError(t, err)
		b.commit(t, changefeed.KindDeadLetter, fmt.Sprintf("missed-%d", i))
	}
	require.NoError(t, changefeed.Notify(ctx, b.pool))
	b.waitCaughtUp(t)

	started := time.Now()
	again := connect(t, url, seen.id, 0)
	got := []string{subjectOf(t, again.next(t, 10*time.Second)), subjectOf(t, again.next(t, 10*time.Second))}
	require.Equal(t, []string{"missed-0", "missed-1"}, got)
	require.Equal(t, "ready", again.next(t, 5*time.Second).name, "no resync")
	t.Logf("resumed a dead_letter stream across %d other changes in %v", others, time.Since(started))
}

func subjectOf(t *testing.T, ev sseEvent) string {
	t.Helper()
	var data changeData
	require.NoError(t, json.Unmarshal([]byte(ev.data), &data), "event %q", ev.name)
	return data.Subject
}
