package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
)

func TestBulkReplayJobThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator, viewer := b.login(t, auth.Operator), b.login(t, auth.Viewer)
	for range 3 {
		deadMessage(t, b, `{"n":5}`)
	}
	filter := map[string]any{"fingerprint": "fp-422", "destination": "billing"}

	rec := b.api(http.MethodPost, "/api/replay-jobs/estimate", operator, "", map[string]any{"filter": filter})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"estimate":3,"at_least":false,"about":false}`, rec.Body.String())

	rid := uuid.NewString()
	start := map[string]any{"filter": filter, "mode": "redeliver", "rate_per_second": 5, "estimate": 3, "request_id": rid}
	rec = b.api(http.MethodPost, "/api/replay-jobs", operator, rid, start)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var job console.JobView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &job))
	require.Equal(t, "running", job.State)
	require.Equal(t, int64(3), job.Estimate)
	var detail map[string]json.RawMessage
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT detail FROM switchyard.audit_log WHERE request_id = $1 AND action = 'replay_job.start' AND target = $2`, rid, "replay job "+job.ID.String()).Scan(&detail))
	require.JSONEq(t, `{"fingerprint":"fp-422","destination":"billing"}`, string(detail["filter"]))

	// The same request again: the stored response, no second job.
	rec = b.api(http.MethodPost, "/api/replay-jobs", operator, rid, start)
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
	// Another request for the same filter: refused, naming the running job.
	other := uuid.NewString()
	start["request_id"] = other
	rec = b.api(http.MethodPost, "/api/replay-jobs", operator, other, start)
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), job.ID.String())
	require.Zero(t, auditRows(t, b, other))
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.replay_jobs`))

	rec = b.api(http.MethodGet, "/api/replay-jobs/"+job.ID.String(), viewer, "", nil)
	require.Equal(t, http.StatusOK, rec.Code)

	cancel := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/replay-jobs/"+job.ID.String()+"/cancel", operator, cancel, map[string]string{"request_id": cancel})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &job))
	require.Equal(t, "cancelled", job.State)
	require.Equal(t, 1, auditRows(t, b, cancel))

	again := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/replay-jobs/"+job.ID.String()+"/cancel", operator, again, map[string]string{"request_id": again})
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Zero(t, auditRows(t, b, again))
}

// The Replays page's forms: re-apply without a reason is refused at the
// estimate; an estimate offers the confirm button with the form's request
// id; confirming starts one job and tells the jobs table to reload.
func TestBulkReplayForms(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	for range 2 {
		deadMessage(t, b, `{"n":9}`)
	}
	rec := b.request(http.MethodGet, "/replays", b.login(t, auth.Viewer), nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotContains(t, rec.Body.String(), `data-testid="bulk-form"`, "viewers get no form")

	rid := uuid.NewString()
	form := url.Values{"request_id": {rid}, "fingerprint": {"fp-422"}, "mode": {"reapply"}, "rate": {"10"}}
	rec = b.request(http.MethodPost, "/replays/estimate", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "needs a reason")

	form.Set("reason", "validator fixed")
	rec = b.request(http.MethodPost, "/replays/estimate", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	require.Equal(t, "2 dead messages match.", strings.TrimSpace(doc.Find(`[data-testid="bulk-estimate-count"]`).Text()))
	headers, _ := doc.Find(`[data-testid="bulk-start"]`).Attr("hx-headers")
	require.JSONEq(t, `{"Idempotency-Key":"`+rid+`"}`, headers)

	form.Set("estimate", "2")
	rec = b.request(http.MethodPost, "/replays", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "replay-jobs-changed", rec.Header().Get("HX-Trigger"))
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.replay_jobs WHERE mode = 'reapply' AND estimate = 2 AND reason = 'validator fixed'`))
	require.Equal(t, 1, auditRows(t, b, rid))

	rec = b.request(http.MethodGet, "/replays/jobs", operator, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `data-testid="job-cancel"`)
}
