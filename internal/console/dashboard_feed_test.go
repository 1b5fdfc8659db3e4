package console

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/web/templates"
)

type feedStatus changefeed.Status

func (f feedStatus) Status() changefeed.Status { return changefeed.Status(f) }

// The dashboard says nothing while the feed is current, names the
// transaction a long-open one is, and says when changes are held back.
func TestDashboardShowsWhatHoldsTheFeed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		st   changefeed.Status
		want string
		held bool
	}{
		{"current", changefeed.Status{}, "", false},
		{"a short transaction", changefeed.Status{Open: 2, OldestOpen: 41, OldestOpenFor: 2 * time.Second}, "", false},
		{"a long idle transaction", changefeed.Status{Open: 1, OldestOpen: 41, OldestOpenFor: 12500 * time.Millisecond},
			"Live updates wait only for the changes of transaction xid 41, open for 12s", false},
		{"too many open", changefeed.Status{Open: 64, OldestOpen: 7, OldestOpenFor: 3 * time.Second, HeldBack: true},
			"Live updates held back by 64 open transactions; the oldest, xid 7, open for 3s", true},
		{"reads fail", changefeed.Status{Err: "connection refused"}, "Live updates: reading the change feed fails; retrying (see the log)", true},
	} {
		h := &Handler{deps: Deps{Feed: feedStatus(tc.st)}}
		v := h.withFeed(templates.DashboardLive{AsOf: "12:00:00 UTC"})
		require.Equal(t, tc.want, v.Feed, tc.name)
		require.Equal(t, tc.held, v.FeedHeld, tc.name)

		var buf bytes.Buffer
		require.NoError(t, templates.DashboardLiveRegion(v).Render(context.Background(), &buf))
		doc, err := goquery.NewDocumentFromReader(&buf)
		require.NoError(t, err)
		badge := doc.Find(`[data-testid="dash-feed"]`)
		require.Equal(t, tc.want, strings.TrimSpace(badge.Text()), tc.name)
		require.Equal(t, tc.held, badge.HasClass("warn"), tc.name)
	}
}
