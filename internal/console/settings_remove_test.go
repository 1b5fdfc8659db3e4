package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/destcheck"
	"github.com/switchyard/switchyard/internal/destination/jetstream/jstest"
)

// sourceForm is a valid forward source's form, to destination.
func sourceForm(name, destination string) url.Values {
	return url.Values{"name": {name}, "scheme": {"standard-webhooks"}, "secret_refs": {"CRM_SECRET"}, "handler": {"forward"},
		"forward_to": {destination}, "entity_field": {"data.customer.id"}, "tolerance_seconds": {"300"}, "out_of_order": {"apply"},
		"max_attempts": {"5"}, "enabled": {"on"}}
}

// TestSettingsRenameAndDeleteAnswerOnTheirPages: an admin renames a
// destination and a source (redirected to the new name's page, which says
// so) and deletes them (redirected to the list, which says so); a refusal
// answers the edit page again with the reason in its panel.
func TestSettingsRenameAndDeleteAnswerOnTheirPages(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	token := b.login(t, auth.Admin)
	require.Equal(t, http.StatusSeeOther, b.request(http.MethodPost, "/settings/destinations", token, destinationForm("crm")).Code)
	require.Equal(t, http.StatusSeeOther, b.request(http.MethodPost, "/settings/sources", token, sourceForm("hooks", "crm")).Code)

	page := b.request(http.MethodGet, "/settings/destinations/crm", token, nil)
	require.Equal(t, http.StatusOK, page.Code)
	require.Contains(t, page.Body.String(), `action="/settings/destinations/crm/rename"`)
	require.Contains(t, page.Body.String(), `action="/settings/destinations/crm/delete"`)

	rec := b.request(http.MethodPost, "/settings/destinations/crm/rename", token, url.Values{"new_name": {"CRM!"}})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	require.Contains(t, rec.Body.String(), `data-testid="remove-error"`)
	require.Regexp(t, `id="f-new_name" name="new_name" value="CRM!" aria-invalid="true"`, rec.Body.String())

	rec = b.request(http.MethodPost, "/settings/destinations/crm/rename", token, url.Values{"new_name": {"crm-service"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/settings/destinations/crm-service?renamed=crm", rec.Header().Get("Location"))
	page = b.request(http.MethodGet, rec.Header().Get("Location"), token, nil)
	require.Contains(t, page.Body.String(), "Renamed from crm. Every dispatcher uses the new name within 10 s.")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_sources WHERE forward_to = 'crm-service'`))

	rec = b.request(http.MethodPost, "/settings/destinations/crm-service/delete", token, url.Values{})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	require.Contains(t, rec.Body.String(), "Tick the box to confirm the delete.")
	rec = b.request(http.MethodPost, "/settings/destinations/crm-service/delete", token, url.Values{"confirm": {"on"}})
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), "The inbox source hooks forwards to destination crm-service")

	rec = b.request(http.MethodPost, "/settings/sources/hooks/rename", token, url.Values{"new_name": {"crm-hooks"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/settings/sources/crm-hooks?renamed=hooks", rec.Header().Get("Location"))
	page = b.request(http.MethodGet, rec.Header().Get("Location"), token, nil)
	require.Contains(t, page.Body.String(), "Renamed from hooks. Its senders must post to /inbox/crm-hooks now.")
	rec = b.request(http.MethodPost, "/settings/sources/crm-hooks/delete", token, url.Values{"confirm": {"on"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/settings?deleted=source&name=crm-hooks", rec.Header().Get("Location"))
	list := b.request(http.MethodGet, rec.Header().Get("Location"), token, nil)
	require.Contains(t, list.Body.String(), "Inbox source crm-hooks deleted.")

	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'crm-service', '{}')`)
	require.NoError(t, err)
	rec = b.request(http.MethodPost, "/settings/destinations/crm-service/delete", token, url.Values{"confirm": {"on"}})
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), "still has 1 pending message to deliver")
	_, err = b.pool.Exec(context.Background(), `UPDATE switchyard.outbox SET state = 'delivered', finished_at = now()`)
	require.NoError(t, err)
	rec = b.request(http.MethodPost, "/settings/destinations/crm-service/delete", token, url.Values{"confirm": {"on"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	list = b.request(http.MethodGet, rec.Header().Get("Location"), token, nil)
	require.Contains(t, list.Body.String(), "Destination crm-service deleted.")
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.destinations`))
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action IN
		('destination.rename', 'destination.delete', 'inbox_source.rename', 'inbox_source.delete') AND actor = 'admin'`))

	rec = b.request(http.MethodPost, "/settings/destinations/crm-service/delete", token, url.Values{"confirm": {"on"}})
	require.Equal(t, http.StatusNotFound, rec.Code)
	// A notice is only ever a kind and a name, never other text.
	list = b.request(http.MethodGet, "/settings?deleted=source&name="+url.QueryEscape("Call +1 555 now"), token, nil)
	require.NotContains(t, list.Body.String(), "Call +1")
}

// TestSettingsRenameAndDeleteRefuseOthersAndCrossSite: viewers and
// operators get 403, a cross-site post too (the CSRF check), and nothing
// changes.
func TestSettingsRenameAndDeleteRefuseOthersAndCrossSite(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	admin := b.login(t, auth.Admin)
	require.Equal(t, http.StatusSeeOther, b.request(http.MethodPost, "/settings/destinations", admin, destinationForm("crm")).Code)
	require.Equal(t, http.StatusSeeOther, b.request(http.MethodPost, "/settings/sources", admin, sourceForm("hooks", "crm")).Code)
	posts := []struct {
		path string
		form url.Values
	}{
		{"/settings/destinations/crm/rename", url.Values{"new_name": {"crm2"}}},
		{"/settings/destinations/crm/delete", url.Values{"confirm": {"on"}}},
		{"/settings/sources/hooks/rename", url.Values{"new_name": {"hooks2"}}},
		{"/settings/sources/hooks/delete", url.Values{"confirm": {"on"}}},
	}
	for _, who := range []auth.Role{auth.Viewer, auth.Operator} {
		token := b.login(t, who)
		for _, p := range posts {
			require.Equal(t, http.StatusForbidden, b.request(http.MethodPost, p.path, token, p.form).Code, "%s as %s", p.path, who)
		}
	}
	for _, p := range posts {
		req := httptest.NewRequest(http.MethodPost, p.path, strings.NewReader(p.form.Encode()))
		req.RemoteAddr = "192.0.2.10:41000"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: admin})
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusForbidden, rec.Code, "cross-site %s", p.path)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.destinations WHERE name = 'crm'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_sources WHERE name = 'hooks'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action LIKE '%.rename' OR action LIKE '%.delete'`))
}

// TestDashboardFollowsTheStreamRecheck: a JetStream destination saved
// before its stream exists fails on the dashboard; the background
// recheck notices the stream created later, and its deletion after.
func TestDashboardFollowsTheStreamRecheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := jstest.New(t)
	b := setupAccessLogged(t, slog.New(slog.NewTextHandler(io.Discard, nil)), false, nil, nil, nil, func(d *console.Deps) { d.NATSURL = srv.URL })
	form := destinationForm("orders-js")
	form.Set("kind", "jetstream")
	form.Set("address", "orders")
	require.Equal(t, http.StatusSeeOther, b.request(http.MethodPost, "/settings/destinations", b.login(t, auth.Admin), form).Code)
	viewer := b.login(t, auth.Viewer)
	failing := func() bool {
		dash := b.request(http.MethodGet, "/", viewer, nil)
		require.Equal(t, http.StatusOK, dash.Code)
		return strings.Contains(dash.Body.String(), "destination orders-js: no stream captures orders.&gt;")
	}
	require.True(t, failing())

	nc, err := nats.Connect(srv.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, natsjs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: natsjs.MemoryStorage})
	require.NoError(t, err)
	cfg := destcheck.Config{NATSURL: srv.URL}
	_, err = destcheck.Recheck(ctx, b.pool, cfg)
	require.NoError(t, err)
	require.False(t, failing(), "the stream created after the save is noticed")

	require.NoError(t, js.DeleteStream(ctx, "ORDERS"))
	_, err = destcheck.Recheck(ctx, b.pool, cfg)
	require.NoError(t, err)
	require.True(t, failing(), "and so is its deletion")
}
