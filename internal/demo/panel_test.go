package demo

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/web/static"
	"github.com/switchyard/switchyard/web/templates"
)

// The panel refuses out-of-range input with a sentence and changes
// nothing; valid input changes what the traffic and the destination read.
func TestPanelApply(t *testing.T) {
	t.Parallel()
	valid := url.Values{"orders_per_second": {"5"}, "inbox_per_second": {"1.5"}, "failure_percent": {"50"}, "latency_ms": {"10"}, "outage": {"on"}}
	cases := []struct {
		field, value, refusal string
	}{
		{"orders_per_second", "2001", "Orders per second"},
		{"inbox_per_second", "-1", "Webhooks per second"},
		{"failure_percent", "1.5", "Failure rate"},
		{"latency_ms", "x", "Latency"},
	}
	for _, tc := range cases {
		d := New(slog.New(slog.DiscardHandler))
		form := url.Values{}
		for k, v := range valid {
			form[k] = v
		}
		form.Set(tc.field, tc.value)
		require.Contains(t, d.Panel().Apply(form), tc.refusal, tc.field)
		require.Equal(t, defaults, d.control.settings(), "a refused form changes nothing")
	}
	d := New(slog.New(slog.DiscardHandler))
	require.Empty(t, d.Panel().Apply(valid))
	require.Equal(t, Settings{OrdersPerSecond: 5, InboxPerSecond: 1.5, FailurePercent: 50, LatencyMs: 10, Outage: true}, d.control.settings())
}

// The panel shows the current settings in its form, with the CSRF token.
func TestPanelRender(t *testing.T) {
	t.Parallel()
	assets, err := static.New()
	require.NoError(t, err)
	var buf bytes.Buffer
	page := templates.Page{Title: "Demo", Section: templates.SectionDashboard, Assets: assets}
	require.NoError(t, New(slog.New(slog.DiscardHandler)).Panel().Render(page, "tok", true).Render(context.Background(), &buf))
	html := buf.String()
	require.Contains(t, html, `data-testid="demo-form"`)
	require.Contains(t, html, `name="orders_per_second" min="0" max="2000" step="any" value="20"`)
	require.Contains(t, html, `name="_csrf" value="tok"`)
	require.Contains(t, html, `data-testid="demo-saved"`)
}
