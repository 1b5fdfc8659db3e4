package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
)

// The marks move on to the last message a claim leased of each
// destination; a destination that got less than it asked for, in a claim
// the limit did not cut short, starts at the head again, as does one
// whose mark is markAge old, and one forgotten while a claim was under
// way stays forgotten when that claim ends.
func TestUnorderedMarks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	row := func(destination string, id int64, at time.Time) queries.OutboxClaimUnorderedRow {
		return queries.OutboxClaimUnorderedRow{ID: id, Destination: destination, NextAttemptAt: at}
	}
	var u unorderedMarks
	names := []string{"a", "b"}
	where := func(now time.Time) ([]time.Time, []int64) {
		s := u.start(names, now)
		return s.at, s.id
	}
	at, id := where(t0)
	require.Equal(t, []time.Time{{}, {}}, at, "at the head")
	require.Equal(t, []int64{0, 0}, id)

	s := u.start(names, t0)
	u.claimed(names, []int32{3, 3}, 4, s, []queries.OutboxClaimUnorderedRow{
		row("a", 7, t0), row("a", 9, t0), row("a", 8, t0), row("b", 4, t0.Add(-time.Second)),
	}, t0)
	at, id = where(t0)
	require.Equal(t, []time.Time{t0, t0.Add(-time.Second)}, at, "the limit cut the claim short: b keeps its mark")
	require.Equal(t, []int64{9, 4}, id)

	s = u.start(names, t0)
	u.claimed(names, []int32{3, 3}, 6, s, []queries.OutboxClaimUnorderedRow{
		row("a", 10, t0), row("a", 11, t0), row("a", 12, t0), row("b", 5, t0),
	}, t0.Add(500*time.Millisecond))
	at, id = where(t0.Add(500 * time.Millisecond))
	require.Equal(t, []time.Time{t0, {}}, at, "b caught up: at the head again")
	require.Equal(t, []int64{12, 0}, id)

	at, id = where(t0.Add(markAge))
	require.Equal(t, []time.Time{{}, {}}, at, "a's mark, set at t0, is markAge old")
	require.Equal(t, []int64{0, 0}, id)

	s = u.start(names, t0)
	other := u.start(names, t0)
	u.claimed(names, []int32{1, 1}, 2, other, []queries.OutboxClaimUnorderedRow{row("a", 20, t0), row("b", 21, t0)}, t0)
	u.forget("a")
	u.claimed(names, []int32{1, 1}, 2, s, []queries.OutboxClaimUnorderedRow{row("a", 30, t0), row("b", 19, t0)}, t0)
	_, id = where(t0)
	require.Equal(t, []int64{0, 21}, id, "a was forgotten during the claim; b's other claim went further")
}

// A dispatcher's unordered claims start after the last message it leased,
// not at the head among the messages in flight; one due behind that mark
// (its transaction committed after the claims had passed its time) is
// taken by the claim after the one that finds its destination caught up.
func TestUnorderedClaimsStartAfterTheLastLeaseAndComeBackForWhatIsBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	msgs := make([]Message, 20)
	for i := range msgs {
		msgs[i] = Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
	}
	enqueue(t, pool, msgs...)
	var first, late int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT min(id) FROM switchyard.outbox`).Scan(&first))
	claim := func() []int64 {
		t.Helper()
		groups, err := d.claim(ctx, "w", 10, nil)
		require.NoError(t, err)
		var ids []int64
		for _, g := range groups {
			for _, m := range g.msgs {
				ids = append(ids, m.ID-first)
			}
		}
		slices.Sort(ids)
		return ids
	}
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, claim())
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{"late": true}`)})
	require.NoError(t, pool.QueryRow(ctx, `UPDATE switchyard.outbox SET next_attempt_at = next_attempt_at - interval '1 minute'
		WHERE payload->>'late' = 'true' RETURNING id`).Scan(&late))
	require.Equal(t, []int64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, claim(), "after the mark, not the late message first")
	require.Empty(t, claim(), "caught up: nothing after the mark")
	require.Equal(t, []int64{late - first}, claim(), "from the head again")
}
