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

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
)

// Issue 15, item 5: the JSON API reads a body with a limit even without an
// Idempotency-Key, so a 20 MiB reason is refused (413) and never stored;
// a reason over its maximum is refused naming the field (422).
func TestOversizedOperatorTextIsRefusedAndNeverStored(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	id := deadMessage(t, b, `{"order":1}`)
	path := "/api/messages/" + itoa(id) + "/discard"

	huge := uuid.NewString()
	rec := b.api(http.MethodPost, path, operator, "", map[string]string{"request_id": huge, "reason": strings.Repeat("x", 20<<20)})
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Zero(t, auditRows(t, b, huge))

	long := uuid.NewString()
	rec = b.api(http.MethodPost, path, operator, long, map[string]string{"request_id": long, "reason": strings.Repeat("x", action.MaxReasonChars+1)})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "reason is too long")
	require.Zero(t, auditRows(t, b, long))

	rec = b.api(http.MethodPost, "/api/replay-jobs/estimate", operator, "", map[string]any{"filter": map[string]string{"topic": strings.Repeat("t", action.MaxFilterChars+1)}})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "topic filter is too long")

	require.Equal(t, int64(0), int64(countRows(t, b, `SELECT count(*) FROM switchyard.audit_log WHERE length(reason) > $1`, action.MaxReasonChars)))
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND state = 'dead'`, id), "nothing was discarded")
}

// Pages that show reasons cut a long one, escaped, with the whole behind
// a disclosure.
func TestLongReasonsAreClippedOnTheAuditAndReplaysPages(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator, admin := b.login(t, auth.Operator), b.login(t, auth.Admin)
	deadMessage(t, b, `{"order":1}`)
	reason := "<script>alert(1)</script>" + strings.Repeat("r", action.MaxReasonChars-30) + "END"

	rid := uuid.NewString()
	rec := b.api(http.MethodPost, "/api/replay-jobs", operator, rid, map[string]any{"filter": map[string]string{"fingerprint": "fp-422"},
		"mode": "reapply", "reason": reason, "rate_per_second": 1, "request_id": rid})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())

	for _, page := range []struct{ path, token string }{{"/audit?action=replay_job.start", admin}, {"/replays", operator}} {
		rec = b.request(http.MethodGet, page.path, page.token, nil)
		require.Equal(t, http.StatusOK, rec.Code)
		require.NotContains(t, rec.Body.String(), "<script>alert", page.path)
		doc, err := goquery.NewDocumentFromReader(rec.Body)
		require.NoError(t, err)
		clipped := doc.Find(`details[data-testid="clipped"]`).FilterFunction(func(_ int, s *goquery.Selection) bool {
			return strings.Contains(s.Text(), "END")
		})
		require.Equal(t, 1, clipped.Length(), page.path)
		summary := clipped.Find("summary").Text()
		require.True(t, strings.HasPrefix(summary, "<script>alert(1)</script>"), summary)
		require.NotContains(t, summary, "END", "the summary is cut")
		require.Contains(t, clipped.Find("span").Text(), reason, "the whole is there")
	}
}

// Issue 15, item 15: an empty filter needs "all": true; the estimate a
// client sends is ignored, the job records the server's.
func TestBulkReplayOfEverythingNeedsAll(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	for range 2 {
		deadMessage(t, b, `{"n":1}`)
	}
	rid := uuid.NewString()
	rec := b.api(http.MethodPost, "/api/replay-jobs", operator, rid, map[string]any{})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "filter is empty")
	require.Zero(t, countRows(t, b, `SELECT count(*) FROM switchyard.replay_jobs`))
	require.Zero(t, auditRows(t, b, rid))

	rid = uuid.NewString()
	rec = b.api(http.MethodPost, "/api/replay-jobs", operator, rid, map[string]any{"all": true, "estimate": -1, "rate_per_second": 1})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var job console.JobView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &job))
	require.Equal(t, int64(2), job.Estimate)
	var estimate int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT estimate FROM switchyard.replay_jobs WHERE id = $1`, job.ID).Scan(&estimate))
	require.Equal(t, int64(2), estimate)

	// The form says the same, and its checkbox is the "all".
	form := url.Values{"request_id": {uuid.NewString()}, "mode": {"redeliver"}, "rate": {"1"}}
	rec = b.request(http.MethodPost, "/replays/estimate", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `data-testid="bulk-error"`)
	require.NotContains(t, rec.Body.String(), `data-testid="bulk-start"`)
	form.Set("all", "true")
	rec = b.request(http.MethodPost, "/replays/estimate", operator, form)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `data-testid="bulk-start"`)
	require.Contains(t, rec.Body.String(), "2 dead messages match.", "no runner runs here: the job above replayed nothing")
}
