package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
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
		d := New(slog.New(slog.DiscardHandler), Config{})
		form := url.Values{}
		for k, v := range valid {
			form[k] = v
		}
		form.Set(tc.field, tc.value)
		require.Contains(t, d.Panel().Apply(form), tc.refusal, tc.field)
		require.Equal(t, defaults, d.control.settings(), "a refused form changes nothing")
	}
	d := New(slog.New(slog.DiscardHandler), Config{})
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
	require.NoError(t, New(slog.New(slog.DiscardHandler), Config{}).Panel().Render(page, "tok", true).Render(context.Background(), &buf))
	html := buf.String()
	require.Contains(t, html, `data-testid="demo-form"`)
	require.Contains(t, html, `name="orders_per_second" min="0" max="2000" step="any" value="20"`)
	require.Contains(t, html, `name="_csrf" value="tok"`)
	require.Contains(t, html, `data-testid="demo-saved"`)
}

// The drift form refuses out-of-range counts and changes nothing; valid
// counts change the external system at random positions, and its
// provider-down box takes both providers down, keeping the other settings.
func TestPanelDrift(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := New(slog.New(slog.DiscardHandler), Config{})
	d.mirror.start(ctx)
	for i := int64(1); i <= 10; i++ {
		d.mirror.order(i, "ada", 100*i)
	}
	d.mirror.accepted("k1", []byte(`{"order_id": 1}`))
	d.mirror.accepted("k2", []byte(`{"key": "3", "deleted": true}`))
	orders, hooks := d.mirror.providers()
	require.Contains(t, d.Panel().Apply(url.Values{"form": {"drift"}, "drop": {"1001"}}), "Drift")
	require.Contains(t, d.Panel().Apply(url.Values{"form": {"drift"}, "add": {"x"}}), "Drift")
	require.Equal(t, defaults, d.control.settings())

	require.Empty(t, d.Panel().Apply(url.Values{"form": {"drift"}, "add": {"2"}, "lose_deliveries": {"1"}, "provider_down": {"on"}}))
	want := defaults
	want.ProviderDown = true
	require.Equal(t, want, d.control.settings())
	require.Equal(t, -1, lookups(t, hooks.URL(), `{"keys":["k1","k2"]}`), "down: every lookup refused")
	require.Empty(t, d.Panel().Apply(url.Values{"form": {"drift"}}))
	require.Equal(t, 1, lookups(t, hooks.URL(), `{"keys":["k1","k2"]}`), "one delivery lost")
	require.Equal(t, 2, lookups(t, orders.URL(), `{"keys":["1000000001","1000000002"]}`), "two orders added")
	require.Equal(t, 0, lookups(t, orders.URL(), `{"keys":["3"]}`), "a repair's deletion applied")
}

// lookups asks a provider for keys and counts the entities it has, or -1
// when it refuses.
func lookups(t *testing.T, url, body string) int {
	t.Helper()
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	var out struct{ Entities []json.RawMessage }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return len(out.Entities)
}
