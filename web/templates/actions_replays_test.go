package templates

import (
	"context"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

// The bulk replay form's confirmation says how the number was found: a
// count, a count that stopped at its cap, or the planner's estimate of a
// filter that matches more (issue 14); only an exact count is the number
// the start button names.
func TestBulkReplayConfirmationSaysHowItCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		form          BulkForm
		count, button string
	}{
		{BulkForm{Estimate: 1234}, "1,234 dead messages match.", "Replay 1,234 messages (redeliver)"},
		{BulkForm{Estimate: 10000, AtLeast: true}, "At least 10,000 dead messages match.", "Replay every matching message (redeliver)"},
		{BulkForm{Estimate: 41072, About: true}, "About 41,000 dead messages match (estimated from the table's statistics).", "Replay every matching message (redeliver)"},
	} {
		tc.form.Estimated, tc.form.Mode = true, "redeliver"
		var b strings.Builder
		require.NoError(t, BulkReplayForm(tc.form).Render(context.Background(), &b))
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
		require.NoError(t, err)
		require.Equal(t, tc.count, strings.Join(strings.Fields(doc.Find("[data-testid=bulk-estimate-count]").Text()), " "))
		require.Equal(t, tc.button, strings.Join(strings.Fields(doc.Find("[data-testid=bulk-start]").Text()), " "))
	}
}
