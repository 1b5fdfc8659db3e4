package changefeed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestPositionRoundTripsAndRefusesWhatStringCannotProduce(t *testing.T) {
	t.Parallel()
	for _, p := range []Position{
		{},
		{After: Cursor{XID: 9, ID: 4}},
		{After: Cursor{XID: 9, ID: 4}, Open: []Open{{XID: 3}, {XID: 5, Seen: 2}}},
	} {
		got, err := ParsePosition(p.String())
		require.NoError(t, err, p.String())
		require.True(t, p.Equal(got), p.String())
	}
	require.Equal(t, "9-4.3.5-2", Position{After: Cursor{XID: 9, ID: 4}, Open: []Open{{XID: 3}, {XID: 5, Seen: 2}}}.String())
	for _, bad := range []string{"", "9-4.", "9-4.x", "9-4.9", "9-4.5.3", "9-4.5.5", "9-4.3--1"} {
		_, err := ParsePosition(bad)
		require.Error(t, err, bad)
	}
	many := "1000-1"
	for x := range MaxOpen + 1 {
		many += fmt.Sprintf(".%d", x+1)
	}
	_, err := ParsePosition(many)
	require.Error(t, err, "more than MaxOpen open transactions")
}

func TestPositionHasAndWithin(t *testing.T) {
	t.Parallel()
	p := Position{After: Cursor{XID: 10, ID: 50}, Open: []Open{{XID: 4}, {XID: 7, Seen: 20}}}
	for c, want := range map[Cursor]bool{
		{XID: 3, ID: 99}: true, {XID: 4, ID: 1}: false, {XID: 7, ID: 20}: true, {XID: 7, ID: 21}: false,
		{XID: 10, ID: 50}: true, {XID: 10, ID: 51}: false, {XID: 11, ID: 1}: false,
	} {
		require.Equal(t, want, p.Has(c), c.String())
	}
	later := Position{After: Cursor{XID: 12, ID: 60}, Open: []Open{{XID: 7, Seen: 25}, {XID: 11}}}
	require.True(t, p.Within(later), "4 ended, 7 moved on, 11 opened above p")
	require.False(t, later.Within(p))
	require.False(t, p.Within(Position{After: Cursor{XID: 12, ID: 60}, Open: []Open{{XID: 7, Seen: 10}}}), "the other reader has less of 7")
	require.False(t, p.Within(Position{After: Cursor{XID: 12, ID: 60}, Open: []Open{{XID: 5}}}), "the other reader lacks 5, which p has")
	require.True(t, p.Within(p))
}

// advance is the whole rule of the Listener: a table of snapshots.
func TestAdvanceDeliversAroundOpenTransactions(t *testing.T) {
	t.Parallel()
	ch := func(xid uint64, id int64) Change { return Change{Cursor: Cursor{XID: xid, ID: id}} }
	start := Position{After: Cursor{XID: 10, ID: 5}, Open: []Open{{XID: 4}, {XID: 6, Seen: 2}, {XID: 8}}}
	for _, tc := range []struct {
		name string
		from Position // zero: start
		snap snapshot
		max  int
		want []string // positions after each delivered change
		next string
		held bool
	}{{
		name: "nothing new, 8 ended without rows",
		snap: snapshot{inProgress: []uint64{4, 6}},
		max:  MaxOpen, next: "10-5.4.6-2",
	}, {
		name: "6 committed two rows, then fresh rows above 12 and 14 still open",
		snap: snapshot{inProgress: []uint64{4, 8, 12, 14}, ended: []Change{ch(6, 3), ch(6, 4)}, fresh: []Change{ch(11, 6), ch(13, 7), ch(15, 8)}},
		max:  MaxOpen,
		want: []string{"10-5.4.6-3.8", "10-5.4.8", "11-6.4.8", "13-7.4.8.12", "15-8.4.8.12.14"},
		next: "15-8.4.8.12.14",
	}, {
		name: "the ended rows were cut: the last transaction stays open at its last row",
		snap: snapshot{inProgress: []uint64{}, ended: []Change{ch(4, 1), ch(6, 3)}, endedCut: true},
		max:  MaxOpen,
		want: []string{"10-5.6-2.8", "10-5.6-3.8"},
		next: "10-5.6-3.8",
	}, {
		name: "too many open: stop before the row that needs a fourth",
		snap: snapshot{inProgress: []uint64{4, 6, 8, 12}, fresh: []Change{ch(11, 6), ch(13, 7)}},
		max:  3,
		want: []string{"11-6.4.6-2.8"},
		next: "11-6.4.6-2.8", held: true,
	}, {
		name: "a start position (xmax, 0) whose xid was taken since, by a transaction still open",
		from: Position{After: Cursor{XID: 20}},
		snap: snapshot{inProgress: []uint64{20}, fresh: []Change{ch(21, 9)}},
		max:  MaxOpen,
		want: []string{"21-9.20"},
		next: "21-9.20",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			from := start
			if tc.from.After.XID != 0 {
				from = tc.from
			}
			batch, next, held := advance(from, tc.snap, tc.max)
			var got []string
			for _, c := range batch {
				got = append(got, c.Position.String())
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.next, next.String())
			require.Equal(t, tc.held, held)
		})
	}
}

// An idle transaction on another connection, and one in another
// database of the server (BEGIN, txid_current(), then nothing, as an
// unrelated application might hold for minutes), delay no change: every change committed meanwhile arrives on its NOTIFY, and the
// status names the open transaction.
func TestLongUnrelatedTransactionDelaysNothing(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	l := NewListener(pool, Config{From: &Cursor{}, PollInterval: time.Hour, SettleRetry: time.Hour})
	start(t, l)
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()

	idle, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer idle.Rollback(ctx)
	var idleXID uint64
	require.NoError(t, idle.QueryRow(ctx, "SELECT txid_current()").Scan(&idleXID))
	// And one in another database of the server, as another application's.
	elsewhere := pool.Config().ConnConfig.Copy()
	elsewhere.Database = "postgres"
	other, err := pgx.ConnectConfig(ctx, elsewhere)
	require.NoError(t, err)
	defer other.Close(ctx)
	otherTx, err := other.Begin(ctx)
	require.NoError(t, err)
	defer otherTx.Rollback(ctx)
	var otherXID uint64
	require.NoError(t, otherTx.QueryRow(ctx, "SELECT txid_current()").Scan(&otherXID))

	for i := range 3 {
		appendCommitted(t, pool, "k", fmt.Sprintf("during-%d", i))
		require.NoError(t, Notify(ctx, pool))
		// Thirty seconds: far less than the hour the poll and the retry
		// would take, so the notification alone delivers; and far more
		// than a loaded 2-core machine under the race detector needs.
		got := c.waitFor(t, i+1, 30*time.Second)
		require.Equal(t, fmt.Sprintf("during-%d", i), got[i].Subject)
	}
	st := l.Status()
	require.False(t, st.HeldBack)
	require.Equal(t, []Open{{XID: idleXID}}, openOf(st.Position, idleXID), "the idle transaction is remembered")
	require.Equal(t, []Open{{XID: otherXID}}, openOf(st.Position, otherXID), "so is the other database's")
	require.LessOrEqual(t, st.OldestOpen, idleXID)

	require.NoError(t, idle.Rollback(ctx))
	require.NoError(t, otherTx.Rollback(ctx))
	appendCommitted(t, pool, "k", "after")
	require.NoError(t, Notify(ctx, pool))
	got := c.waitFor(t, 4, 30*time.Second)
	requireResumable(t, got)
	require.Empty(t, openOf(l.Position(), idleXID), "the ended transactions are forgotten")
	require.Empty(t, openOf(l.Position(), otherXID))
}

// Writers commit concurrently with random delays while a long transaction
// holds a change of its own and commits last, and another aborts: every
// committed change reaches the subscriber exactly once, the long one after
// its commit, the aborted one never; every position is resumable, and
// Since from any of them returns exactly what came after it.
func TestNoChangeIsSkippedAroundLongAndAbortedTransactions(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	l := NewListener(pool, Config{From: &Cursor{}, BatchSize: 7, PollInterval: 50 * time.Millisecond})
	start(t, l)
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()

	long, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer long.Rollback(ctx)
	require.NoError(t, Append(ctx, long, Change{Kind: "k", Subject: "long"}))
	aborted, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, Append(ctx, aborted, Change{Kind: "k", Subject: "aborted"}))

	const writers, each = 8, 20
	errs := make(chan error, writers)
	testwait.Together(writers, func(w int) {
		errs <- write(ctx, pool, w, each)
	})
	for range writers {
		require.NoError(t, <-errs)
	}
	got := c.waitFor(t, writers*each, 20*time.Second)
	for _, ch := range got {
		require.NotEqual(t, "long", ch.Subject, "the long transaction has not committed")
	}
	require.NoError(t, aborted.Rollback(ctx))
	require.NoError(t, long.Commit(ctx))
	appendCommitted(t, pool, "k", "last")
	got = c.waitFor(t, writers*each+2, 20*time.Second)
	require.Len(t, got, writers*each+2)
	requireResumable(t, got)
	subjectsSeen := map[string]bool{}
	for _, ch := range got {
		subjectsSeen[ch.Subject] = true
	}
	require.True(t, subjectsSeen["long"] && subjectsSeen["last"] && !subjectsSeen["aborted"])

	final := got[len(got)-1].Position
	for i := 0; i < len(got); i += 9 {
		rest, err := Since(ctx, pool, got[i].Position, final, Filter{}, len(got))
		require.NoError(t, err)
		require.ElementsMatch(t, cursors(got[i+1:]), cursors(rest), "resume from change %d (%s)", i, got[i].Position)
		requireResumable(t, append(append([]Change(nil), got[:i+1]...), rest...))
	}
}

func cursors(changes []Change) []Cursor {
	out := make([]Cursor, len(changes))
	for i, c := range changes {
		out[i] = c.Cursor
	}
	return out
}

// Since with a filter reads only the changes of the filter's kinds (and
// subjects), through their indexes, so a stream of a rare kind resumes
// across many changes of other kinds: the resume window is the retention.
func TestSinceFiltersByKindAndSubjectAcrossOtherKinds(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	from := At(Cursor{})
	// A day of statistics rows, one a second, with the rare kinds among
	// them; created 23 hours ago onwards, inside the retention.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.changes (kind, subject, created_at)
		SELECT CASE WHEN g % 10000 = 0 THEN 'dead_letter' WHEN g % 25000 = 0 THEN 'message_changed' ELSE 'stats' END,
		       CASE WHEN g % 25000 = 0 THEN (g / 25000)::text ELSE '' END,
		       now() - interval '23 hours' + g * interval '1 second'
		FROM generate_series(1, 86400) AS g`)
	require.NoError(t, err)
	var upTo Cursor
	require.NoError(t, pool.QueryRow(ctx, "SELECT xid::text::bigint, max(id) FROM switchyard.changes GROUP BY xid").Scan(&upTo.XID, &upTo.ID))
	limit := 257 // the hub asks for its queue size and one more

	dead, err := Since(ctx, pool, from, At(upTo), Filter{Kinds: []string{KindDeadLetter}}, limit)
	require.NoError(t, err)
	require.Len(t, dead, 8, "dead_letter rows 10000..80000, whatever the 86,000 stats rows around them")
	msg, err := Since(ctx, pool, from, At(upTo), Filter{Kinds: []string{KindMessageChanged}, Subjects: []string{"2"}}, limit)
	require.NoError(t, err)
	require.Len(t, msg, 0, "g=50000 is a multiple of 10000: dead_letter, subject 2")
	msg, err = Since(ctx, pool, from, At(upTo), Filter{Kinds: []string{KindDeadLetter}, Subjects: []string{"2"}}, limit)
	require.NoError(t, err)
	require.Len(t, msg, 1)
	both, err := Since(ctx, pool, from, At(upTo), Filter{Kinds: []string{KindDeadLetter, KindMessageChanged}}, limit)
	require.NoError(t, err)
	require.Len(t, both, 8+2, "25000 and 75000 are message_changed")
	for i := 1; i < len(both); i++ {
		require.Equal(t, -1, both[i-1].Cursor.Compare(both[i].Cursor), "merged in cursor order")
	}
	all, err := Since(ctx, pool, from, At(upTo), Filter{}, limit)
	require.NoError(t, err)
	require.Len(t, all, limit, "unfiltered: more than the limit, the caller resyncs")
}

// Two readers' positions often differ only in transactions, one reader
// having seen one end that the other still waits for. A client of the
// first resumes from the second if that transaction wrote nothing to the
// feed; if it did, the second reader is behind and Since says so.
func TestSinceAcrossPositionsThatDifferInOpenTransactions(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	idle, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer idle.Rollback(ctx)
	var idleXID, writerXID uint64
	require.NoError(t, idle.QueryRow(ctx, "SELECT txid_current()").Scan(&idleXID))
	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer writer.Rollback(ctx)
	require.NoError(t, Append(ctx, writer, Change{Kind: "k", Subject: "late"}))
	require.NoError(t, writer.QueryRow(ctx, "SELECT txid_current()").Scan(&writerXID))
	appendCommitted(t, pool, "k", "r")
	var r Cursor
	require.NoError(t, pool.QueryRow(ctx, "SELECT xid::text::bigint, id FROM switchyard.changes").Scan(&r.XID, &r.ID))
	behind := Position{After: r, Open: []Open{{XID: idleXID}, {XID: writerXID}}}

	require.NoError(t, idle.Rollback(ctx))
	require.NoError(t, writer.Commit(ctx))
	sawIdleEnd := Position{After: r, Open: []Open{{XID: writerXID}}}
	require.False(t, sawIdleEnd.Within(behind), "not from the positions alone")
	got, err := Since(ctx, pool, sawIdleEnd, behind, Filter{}, 10)
	require.NoError(t, err, "the idle transaction wrote nothing")
	require.Empty(t, got)

	sawBothEnd := Position{After: r}
	_, err = Since(ctx, pool, sawBothEnd, behind, Filter{}, 10)
	require.ErrorIs(t, err, ErrNotWithin, "the writer's change is in sawBothEnd, not yet in behind")

	got, err = Since(ctx, pool, behind, sawBothEnd, Filter{}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"late"}, subjects(got), "the other way round: what behind lacks")
	require.True(t, got[0].Position.Has(got[0].Cursor))
}
