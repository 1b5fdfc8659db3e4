package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/queries"
)

// seedLeases writes 420 messages over two destinations and two topics:
// a quarter delivered, the rest pending, leased by the workers of
// dispatchers d1 (d1/0, d1/1), d2 and "d1/x" (whose worker d1/x/0 is not
// d1's), retrying or queued; four of bill's untried messages in a stretch
// of d1/1 and seven of shop's in one of d2/0 (first tries in flight,
// their rows not written: internal/outbox, stretch.go); then analyzes the
// table.
func seedLeases(t *testing.T, b bundle) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function'), ('bill', 'function')`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, attempts, lease_owner, last_error, finished_at)
		SELECT (ARRAY['order.created', 'order.paid'])[i % 2 + 1], (ARRAY['shop', 'bill'])[(i / 2) % 2 + 1], '{}',
			CASE WHEN i % 4 = 0 THEN 'delivered' ELSE 'pending' END,
			CASE WHEN i % 4 = 0 OR i % 7 < 5 THEN 1 ELSE 0 END,
			CASE WHEN i % 4 <> 0 THEN (ARRAY['d1/0', 'd1/1', 'd2/0', 'd1/x/0'])[i % 7 + 1] END,
			CASE WHEN i % 7 = 4 THEN 'HTTP 503' END,
			CASE WHEN i % 4 = 0 THEN now() END
		FROM generate_series(1, 420) AS i`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox_stretches (destination, owner, leased_until, ids)
		SELECT s.destination, s.owner, now() + interval '1 minute', ARRAY(
			SELECT o.id FROM switchyard.outbox o
			WHERE o.state = 'pending' AND o.lease_owner IS NULL AND o.attempts = 0 AND o.destination = s.destination
			ORDER BY o.id DESC LIMIT s.n)
		FROM (VALUES ('bill', 'd1/1', 4), ('shop', 'd2/0', 7)) AS s (destination, owner, n)`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
}

// inStretchSQL is true of a message that a stretch leases: a first try in
// flight (internal/outbox, stretch.go).
const inStretchSQL = `(attempts = 0 AND id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))`

// inFlightSQL is true of a pending message leased on its row or in a stretch.
const inFlightSQL = `(lease_owner IS NOT NULL OR ` + inStretchSQL + `)`

// leasedBy is true of a message leased by a worker whose name matches
// owner, a condition on it (IN (...), = ...): on its row or in a stretch.
func leasedBy(owner string) string {
	return `(lease_owner ` + owner + ` OR (attempts = 0 AND id IN (
		SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ` + owner + `)))`
}

// Issue 14, item 9: the dashboard's pending figures and a dispatcher's
// leases open the messages they count. The list of a stage or a lease
// holder is exactly the database's, through every page, under other
// filters and by id; each stage's list is as long as the statistics
// leader's count of it (the tiles' and the flow rows' figures); the "N
// new" control and the estimated total honour the filters too.
func TestMessagesListFiltersByStageAndLeaseHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedLeases(t, b)
	ctx := context.Background()
	for _, c := range []struct{ path, where string }{
		{"/messages?leased_by=d1", `state = 'pending' AND ` + leasedBy(`IN ('d1/0', 'd1/1')`)},
		{"/messages?leased_by=d1/x", `state = 'pending' AND lease_owner = 'd1/x/0'`},
		{"/messages?leased_by=d2&destination=shop", `state = 'pending' AND ` + leasedBy(`= 'd2/0'`) + ` AND destination = 'shop'`},
		{"/messages?stage=in_flight", `state = 'pending' AND ` + inFlightSQL},
		{"/messages?stage=retrying", `state = 'pending' AND lease_owner IS NULL AND attempts > 0`},
		{"/messages?stage=queued", `state = 'pending' AND lease_owner IS NULL AND attempts = 0 AND NOT ` + inStretchSQL},
		{"/messages?stage=in_flight&state=pending&error=503", `false`},
		{"/messages?stage=retrying&error=503", `state = 'pending' AND lease_owner IS NULL AND attempts > 0 AND last_error LIKE '%503%'`},
		{"/messages?stage=in_flight&destination=shop&topic=order.paid", `state = 'pending' AND ` + inFlightSQL + ` AND destination = 'shop' AND topic = 'order.paid'`},
		{"/messages?leased_by=d1&state=dead", `false`},
		{"/messages?leased_by=d3", `false`},
	} {
		want := []string(nil)
		if c.where != "false" {
			want = wantIDs(t, b, c.where)
		}
		require.Equal(t, want, walkList(t, b, c.path), c.path)
	}

	// The statistics leader's counts, per destination and topic.
	flows, err := queries.New(b.pool).StatsPendingFlowList(ctx, 100000)
	require.NoError(t, err)
	require.NotEmpty(t, flows)
	var inFlight, retrying, queued int
	for _, f := range flows {
		inFlight, retrying, queued = inFlight+int(f.InFlight), retrying+int(f.Retrying), queued+int(f.Queued)
		for stage, n := range map[string]int64{"in_flight": f.InFlight, "retrying": f.Retrying, "queued": f.Queued} {
			path := "/messages?" + url.Values{"destination": {f.Destination}, "topic": {f.Topic}, "stage": {stage}}.Encode()
			require.Len(t, walkList(t, b, path), int(n), path)
		}
	}
	require.Len(t, walkList(t, b, "/messages?stage=in_flight"), inFlight)
	require.Len(t, walkList(t, b, "/messages?stage=retrying"), retrying)
	require.Len(t, walkList(t, b, "/messages?stage=queued"), queued)

	// Pages both ways; one message by id, if the holder holds it.
	want := wantIDs(t, b, `state = 'pending' AND `+leasedBy(`IN ('d1/0', 'd1/1')`))
	require.Greater(t, len(want), 50, "two pages")
	first := rowIDs(t, b.do(t, http.MethodGet, "/messages?leased_by=d1").Body.String())
	require.Equal(t, want[:50], first)
	second := rowIDs(t, b.do(t, http.MethodGet, "/messages?leased_by=d1&before="+first[49]).Body.String())
	require.Equal(t, want[50:min(100, len(want))], second)
	require.Equal(t, first, rowIDs(t, b.do(t, http.MethodGet, "/messages?leased_by=d1&after="+second[0]).Body.String()))
	require.Equal(t, want[:1], rowIDs(t, b.do(t, http.MethodGet, "/messages?leased_by=d1&id="+want[0]).Body.String()))
	other := wantIDs(t, b, `lease_owner = 'd2/0'`)[0]
	require.NotEqual(t, want, wantIDs(t, b, `state = 'pending' AND lease_owner IN ('d1/0', 'd1/1')`), "d1's stretch holds some of its leases")
	require.Empty(t, rowIDs(t, b.do(t, http.MethodGet, "/messages?leased_by=d1&id="+other).Body.String()))

	// "N new" above a row counts only the holder's.
	above, err := strconv.ParseInt(want[len(want)-1], 10, 64)
	require.NoError(t, err)
	newer := b.do(t, http.MethodGet, fmt.Sprintf("/messages/new?above=%d&leased_by=d1", above-1))
	require.Contains(t, newer.Body.String(), fmt.Sprintf("%d new messages", len(want)))

	// More than a page: the total is the planner's estimate, which takes
	// the filter (the whole table is 420 rows).
	for _, c := range []struct{ path, where string }{
		{"/messages?leased_by=d1", `state = 'pending' AND ` + leasedBy(`IN ('d1/0', 'd1/1')`)},
		{"/messages?stage=in_flight", `state = 'pending' AND ` + inFlightSQL},
	} {
		text, exact := listTotal(t, b, c.path)
		require.False(t, exact, c.path)
		var n int
		_, err := fmt.Sscanf(text, "about %d messages", &n)
		require.NoError(t, err, text)
		exactCount := len(wantIDs(t, b, c.where))
		require.InDelta(t, exactCount, n, float64(exactCount)/4, "%s: %s, %d match", c.path, text, exactCount)
	}

	// The form shows both filters; a list of pending messages takes no
	// bulk replay and says why.
	body := b.do(t, http.MethodGet, "/messages?leased_by=d1&stage=in_flight").Body.String()
	require.Contains(t, body, `name="leased_by" value="d1"`)
	require.Regexp(t, `<option value="in_flight" selected>`, body)
	require.Contains(t, body, "a pending stage or lease holder lists pending ones")
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/messages?stage=leased").Code)
}

// A stage or lease holder walks the backlog's index, at most a window of
// 25,000 of its messages per page: a dispatcher's leases below them are
// on the next page, which the first says it has not searched, and the
// pages together list each lease once.
func TestMessagesListSearchesABacklogInWindows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	// Three leases, ten queued, the lease that is the 25,000th pending
	// message from the top, then 24,999 queued.
	for _, n := range []struct {
		rows  int
		lease any
	}{{3, "d1/0"}, {10, nil}, {1, "d1/1"}, {24999, nil}} {
		_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, attempts, lease_owner)
			SELECT 'order.created', 'shop', '{}', CASE WHEN $2::text IS NULL THEN 0 ELSE 1 END, $2 FROM generate_series(1, $1::int)`, n.rows, n.lease)
		require.NoError(t, err)
	}
	leases := wantIDs(t, b, `lease_owner IS NOT NULL`)
	require.Len(t, leases, 4)
	rec := b.do(t, http.MethodGet, "/messages?leased_by=d1")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, leases[:1], rowIDs(t, rec.Body.String()), "the window ends at the 25,000th pending message")
	require.Contains(t, rec.Body.String(), "Searched 25,000 pending messages, down to message "+leases[0]+"; older ones are searched on the next page.")
	require.Equal(t, leases, walkList(t, b, "/messages?leased_by=d1"))
	require.Equal(t, leases, walkList(t, b, "/messages?stage=in_flight"))
	require.Equal(t, wantIDs(t, b, `lease_owner IS NULL`)[:50], rowIDs(t, b.do(t, http.MethodGet, "/messages?stage=queued").Body.String()))
}

// A message's page says when it will be tried next: for an unordered
// message in flight, when its lease runs out (migration 00024 keeps that
// in leased_until; next_attempt_at still says when it fell due; a first
// try's lease is its stretch's, migration 00033), and for one waiting to
// be retried, its next_attempt_at. It names the lease's holder.
func TestMessagePageShowsALeasedMessagesNextAttemptAsItsLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	var leased, waiting int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, attempts, lease_owner, lease_version, next_attempt_at, leased_until)
		VALUES ('order.paid', 'shop', '{}', 1, 'd1/0', 3, '2026-01-02 03:04:05+00', '2031-05-06 07:08:09+00') RETURNING id`).Scan(&leased))
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, attempts, next_attempt_at)
		VALUES ('order.paid', 'shop', '{}', 1, '2031-02-03 04:05:06+00') RETURNING id`).Scan(&waiting))

	body := b.do(t, http.MethodGet, fmt.Sprintf("/messages/%d", leased)).Body.String()
	require.Regexp(t, `<dt>Next attempt</dt>\s*<dd>2031-05-06 07:08:09 UTC</dd>`, body)
	require.Contains(t, body, "d1/0 · version 3")
	body = b.do(t, http.MethodGet, fmt.Sprintf("/messages/%d", waiting)).Body.String()
	require.Regexp(t, `<dt>Next attempt</dt>\s*<dd>2031-02-03 04:05:06 UTC</dd>`, body)

	var stretched int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, next_attempt_at)
		VALUES ('order.paid', 'shop', '{}', '2026-01-02 03:04:05+00') RETURNING id`).Scan(&stretched))
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox_stretches (destination, owner, leased_until, ids)
		VALUES ('shop', 'd2/0', '2031-07-08 09:10:11+00', ARRAY[$1::bigint - 1, $1::bigint])`, stretched)
	require.NoError(t, err)
	body = b.do(t, http.MethodGet, fmt.Sprintf("/messages/%d", stretched)).Body.String()
	require.Regexp(t, `<dt>Next attempt</dt>\s*<dd>2031-07-08 09:10:11 UTC</dd>`, body, "its stretch's lease expiry")
	require.Contains(t, body, "d2/0 · version 0", "its stretch's holder")
}
