package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

// An inbound event's page says what its attempts were, truthfully, in
// every combination of its status, its count of failed attempts and the
// attempt rows recorded for it (none for events from before they were
// kept, or for a delivery settled by its entity's version): the count,
// the rows listed, and the note that says what the list cannot show. It
// never says that the handler has not run on an event it ran on.
func TestInboxEventPageSaysWhatItsAttemptsWere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type row struct {
		n       int
		outcome string
		actor   string
	}
	cases := []struct {
		name   string
		status string
		failed int
		rows   []row
		count  string
		listed []string // the listed attempts' numbers
		empty  string   // the no-attempts text, when nothing is listed
		note   string   // the note under the list; "": none
	}{
		{name: "processed at once", status: "processed", count: "1", listed: []string{"1"}},
		{name: "processed after unrecorded failures", status: "processed", failed: 3, count: "4", listed: []string{"4"},
			note: "3 earlier attempts are not listed: they were made before attempts were recorded one by one."},
		{name: "processed after recorded failures", status: "processed", failed: 2, rows: []row{{1, "failed", ""}, {2, "failed", ""}},
			count: "3", listed: []string{"1", "2", "3"}},
		{name: "processed by a retry after unrecorded failures", status: "processed", failed: 1, rows: []row{{2, "processed", "alice"}},
			count: "2", listed: []string{"2"}, note: "1 earlier attempt is not listed: it was made before attempts were recorded one by one."},
		{name: "failed, nothing recorded", status: "failed", failed: 3, count: "3",
			empty: "The handler ran 3 times on this event and failed; those attempts were made before attempts were recorded one by one, so only their number and the event's last error are known."},
		{name: "parked once, nothing recorded", status: "parked", failed: 1, count: "1",
			empty: "The handler ran once on this event and failed; those attempts were made before attempts were recorded one by one, so only their number and the event's last error are known."},
		{name: "failed, all recorded", status: "failed", failed: 2, rows: []row{{1, "failed", ""}, {2, "failed", ""}}, count: "2", listed: []string{"1", "2"}},
		{name: "parked, the last recorded", status: "parked", failed: 3, rows: []row{{3, "parked", ""}}, count: "3", listed: []string{"3"},
			note: "2 earlier attempts are not listed: they were made before attempts were recorded one by one."},
		{name: "parked without any attempt", status: "parked", count: "0", empty: "No attempt of the handler is recorded for this event."},
		{name: "stale at once", status: "stale", count: "0",
			empty: "The handler did not run on this event: its entity already had this version or a newer one applied, so the event was settled as stale."},
		{name: "held at once", status: "held", count: "0",
			empty: "The handler has not run on this event: it is held until its entity's previous version is applied."},
		{name: "stale after unrecorded failures", status: "stale", failed: 2, count: "2",
			empty: "The handler ran twice on this event and failed; those attempts were made before attempts were recorded one by one, so only their number and the event's last error are known. " +
				"Then a delivery settled the event as stale, without running the handler: its entity had this version or a newer one applied."},
		{name: "held after a recorded failure", status: "held", failed: 1, rows: []row{{1, "failed", ""}}, count: "1", listed: []string{"1"},
			note: "Then a delivery held the event, without running the handler, until its entity's previous version is applied."},
		{name: "stale by a retry", status: "stale", failed: 1, rows: []row{{1, "failed", ""}, {2, "stale", "alice"}}, count: "2", listed: []string{"1", "2"}},
	}
	ctx := context.Background()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var id int64
			require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO switchyard.inbox_events
				(source, event_id, payload, entity_key, entity_version, status, attempts, last_error, processed_at)
				VALUES ('shop', $1, '{}', 'order:1', 1, $2, $3, CASE WHEN $3 > 0 THEN 'refused' END,
					CASE WHEN $2 IN ('processed', 'stale', 'held') THEN now() END)
				RETURNING id`, "evt_"+strconv.Itoa(i), tc.status, tc.failed).Scan(&id))
			for _, r := range tc.rows {
				_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.inbox_event_attempts (inbox_event_id, attempt, outcome, error, actor)
					VALUES ($1, $2, $3, CASE WHEN $3 IN ('failed', 'parked') THEN 'refused' END, $4)`, id, r.n, r.outcome, r.actor)
				require.NoError(t, err)
			}
			rec := b.do(t, http.MethodGet, fmt.Sprintf("/inbox/events/%d", id))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			doc, err := goquery.NewDocumentFromReader(rec.Body)
			require.NoError(t, err)
			require.Equal(t, tc.count, doc.Find("[data-testid=event-attempts]").Text())
			var listed []string
			doc.Find("[data-testid=event-attempt] td.num").Each(func(_ int, s *goquery.Selection) { listed = append(listed, s.Text()) })
			require.Equal(t, tc.listed, listed)
			empty := doc.Find("[data-testid=no-attempts]")
			if tc.empty == "" {
				require.Zero(t, empty.Length(), "attempts are listed, so no empty state")
			} else {
				require.Equal(t, tc.empty, empty.Text())
			}
			note := doc.Find("[data-testid=attempts-note]")
			if tc.note == "" {
				require.Zero(t, note.Length(), "nothing to add: %s", note.Text())
			} else {
				require.Equal(t, tc.note, note.Text())
			}
			if tc.count != "0" {
				require.NotContains(t, doc.Find("main").Text(), "has not run", "the handler ran on this event")
			}
		})
	}
}
