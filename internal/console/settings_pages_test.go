package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/destination/jetstream/jstest"
)

// destinationForm is a valid destination form.
func destinationForm(name string) url.Values {
	return url.Values{
		"name": {name}, "kind": {"webhook"}, "address": {"https://crm.example/hooks"}, "secret_refs": {"CRM_SECRET"},
		"concurrency": {"4"}, "rate_per_second": {"0"}, "burst": {"1"}, "timeout_ms": {"5000"},
		"breaker_failure_percent": {"50"}, "breaker_min_requests": {"10"}, "breaker_open_ms": {"30000"},
		"retry_base_ms": {"1000"}, "retry_cap_ms": {"600000"}, "max_attempts": {"12"}, "permanent": {"default"},
		"enabled": {"on"},
	}
}

func (b accessBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// TestSettingsPagesRefuseViewerAndOperator: every configuration route
// answers viewers and operators 403, and their posts change nothing.
func TestSettingsPagesRefuseViewerAndOperator(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('billing', 'function', 'billing')`)
	require.NoError(t, err)
	for _, who := range []auth.Role{auth.Viewer, auth.Operator} {
		token := b.login(t, who)
		for _, rq := range []struct {
			method, path string
			form         url.Values
		}{
			{http.MethodGet, "/settings", nil}, {http.MethodGet, "/settings/live", nil},
			{http.MethodGet, "/settings/destinations/new", nil}, {http.MethodGet, "/settings/destinations/billing", nil},
			{http.MethodPost, "/settings/destinations", destinationForm("crm")},
			{http.MethodPost, "/settings/destinations/billing", destinationForm("billing")},
			{http.MethodPost, "/settings/destinations/billing/test", url.Values{}},
			{http.MethodGet, "/settings/sources/new", nil},
			{http.MethodPost, "/settings/sources", url.Values{"name": {"crm"}}},
			{http.MethodPost, "/settings/sources/crm/test", url.Values{}},
		} {
			rec := b.request(rq.method, rq.path, token, rq.form)
			require.Equal(t, http.StatusForbidden, rec.Code, "%s %s as %s", rq.method, rq.path, who)
		}
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'crm' OR kind <> 'function'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.outbox`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action LIKE 'destination.%' OR action LIKE 'inbox_source.%'`))
}

// TestSettingsSaveRefusesCrossSiteRequests: a save without a same-origin
// proof (Sec-Fetch-Site or the CSRF token) is refused and writes nothing;
// with the page's token it saves.
func TestSettingsSaveRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	token := b.login(t, auth.Admin)
	post := func(site string, form url.Values) int {
		req := httptest.NewRequest(http.MethodPost, "/settings/destinations", strings.NewReader(form.Encode()))
		req.RemoteAddr = "192.0.2.10:41000"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusForbidden, post("cross-site", destinationForm("crm")))
	require.Equal(t, http.StatusForbidden, post("", destinationForm("crm")))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations`))

	// A client without Sec-Fetch-Site gets the session's token in the
	// form's _csrf field.
	req := httptest.NewRequest(http.MethodGet, "/settings/destinations/new", nil)
	req.RemoteAddr = "192.0.2.10:41000"
	req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: token})
	page := httptest.NewRecorder()
	b.e.ServeHTTP(page, req)
	require.Equal(t, http.StatusOK, page.Code)
	csrf := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(page.Body.String())
	require.Len(t, csrf, 2, "the form carries the session's CSRF token")
	form := destinationForm("crm")
	form.Set("_csrf", csrf[1])
	require.Equal(t, http.StatusSeeOther, post("", form))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'crm'`))
}

// TestSettingsFormAnswersTheFieldAndKeepsTheInput: invalid input is
// answered 422 with the form again: the field at fault marked, the reason
// under it, and everything typed still there.
func TestSettingsFormAnswersTheFieldAndKeepsTheInput(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	token := b.login(t, auth.Admin)
	form := destinationForm("crm")
	form.Set("address", "https://crm.example/typed-by-hand")
	form.Set("concurrency", "lots")
	rec := b.request(http.MethodPost, "/settings/destinations", token, form)
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	body := rec.Body.String()
	require.Regexp(t, `id="f-concurrency" name="concurrency" value="lots" aria-invalid="true"`, body)
	require.Contains(t, body, `The concurrency must be a whole number from 1 to 10000 deliveries at once; got &#34;lots&#34;.`)
	require.Contains(t, body, `value="https://crm.example/typed-by-hand"`)
	require.Contains(t, body, `<a href="#f-concurrency">concurrency</a>`)
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations`))

	src := url.Values{"name": {"crm"}, "scheme": {"standard-webhooks"}, "secret_refs": {"CRM_SECRET"}, "handler": {"forward"},
		"forward_to": {"nowhere"}, "entity_field": {"data.customer.id"}, "tolerance_seconds": {"300"}, "out_of_order": {"apply"}, "max_attempts": {"5"}}
	rec = b.request(http.MethodPost, "/settings/sources", token, src)
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	body = rec.Body.String()
	require.Regexp(t, `id="f-forward_to" name="forward_to" value="nowhere" aria-invalid="true"`, body)
	require.Contains(t, body, "No destination is named nowhere")
	require.Contains(t, body, `value="data.customer.id"`)

	rec = b.request(http.MethodPost, "/settings/destinations/nowhere", token, destinationForm("nowhere"))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// TestSettingsSaveRedirectsAndShowsTheCheckOnTheDashboard: a JetStream
// destination whose subjects no stream of the (in-process) server
// captures is saved, its page says so, and so does the dashboard's status
// line; the save is audited.
func TestSettingsSaveRedirectsAndShowsTheCheckOnTheDashboard(t *testing.T) {
	t.Parallel()
	srv := jstest.New(t)
	b := setupAccessLogged(t, slog.New(slog.NewTextHandler(io.Discard, nil)), false, nil, nil, nil, func(d *console.Deps) { d.NATSURL = srv.URL })
	token := b.login(t, auth.Admin)
	form := destinationForm("orders-js")
	form.Set("kind", "jetstream")
	form.Set("address", "orders")
	rec := b.request(http.MethodPost, "/settings/destinations", token, form)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/settings/destinations/orders-js?saved=1", rec.Header().Get("Location"))

	page := b.request(http.MethodGet, "/settings/destinations/orders-js?saved=1", token, nil)
	require.Equal(t, http.StatusOK, page.Code)
	require.Contains(t, page.Body.String(), "Saved. Every dispatcher uses it within 10 s.")
	require.Contains(t, page.Body.String(), "no stream captures orders.&gt;")

	dash := b.request(http.MethodGet, "/", b.login(t, auth.Viewer), nil)
	require.Equal(t, http.StatusOK, dash.Code)
	require.Contains(t, dash.Body.String(), "destination orders-js: no stream captures orders.&gt;")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'destination.create' AND actor = 'admin'`))

	form.Set("enabled", "")
	rec = b.request(http.MethodPost, "/settings/destinations/orders-js", token, form)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	dash = b.request(http.MethodGet, "/", b.login(t, auth.Viewer), nil)
	require.NotContains(t, dash.Body.String(), "destination orders-js:", "a disabled destination is no failure")
}
