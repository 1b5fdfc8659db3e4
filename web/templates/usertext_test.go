package templates

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

func TestShownMakesControlCharactersVisible(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"orders":                "orders",
		"abc\u202edef":          "abc⟨U+202E⟩def",
		"\u2066x\u2069":         "⟨U+2066⟩x⟨U+2069⟩",
		"a\u200fb\u061c":        "a⟨U+200F⟩b⟨U+061C⟩",
		"nul\x00esc\x1bdel\x7f": "nul␀esc␛del␡",
		"zero\u200bwidth\ufeff": "zero⟨U+200B⟩width⟨U+FEFF⟩",
		"line\nbreak\ttab":      "line\nbreak\ttab",
		"עברית":                 "עברית", // right-to-left text itself is fine: it is isolated
	} {
		require.Equal(t, want, Shown(in), "%q", in)
	}
}

// A right-to-left override in a topic cannot reorder the text after it:
// the page holds no override character at all (it is shown as
// ⟨U+202E⟩), and every value chosen outside is isolated in its own <bdi>.
func TestOverrideInATopicDoesNotReorderWhatFollows(t *testing.T) {
	t.Parallel()
	rows := []MessageRow{{ID: 7, Topic: "orders\u202e.fdp", Destination: "shop", AggregateType: "order\u2067",
		AggregateID: "42", State: "dead", Error: "boom\u202dx", CreatedAt: time.Unix(0, 0)}}
	var b strings.Builder
	require.NoError(t, MessageTable(rows).Render(context.Background(), &b))
	html := b.String()
	for _, r := range []string{"\u202e", "\u2067", "\u202d"} {
		require.NotContains(t, html, r)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	require.NoError(t, err)
	var isolated []string
	doc.Find(`[data-testid="message-row"] bdi`).Each(func(_ int, s *goquery.Selection) {
		isolated = append(isolated, s.Text())
	})
	require.Equal(t, []string{"boom⟨U+202D⟩x", "orders⟨U+202E⟩.fdp", "shop", "order⟨U+2067⟩", "42"}, isolated, "the error first, after the state")
	row := doc.Find(`[data-testid="message-row"]`).Text()
	require.Less(t, strings.Index(row, "orders⟨U+202E⟩.fdp"), strings.Index(row, "shop"), "the destination still follows the topic")
}
