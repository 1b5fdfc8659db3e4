package console_test

import (
	"net/http"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
)

// changedSubjects lists the subjects of the message_changed rows of the
// feed, oldest first.
func changedSubjects(t *testing.T, b accessBundle) []string {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `SELECT subject FROM switchyard.changes WHERE kind = $1 ORDER BY id`, changefeed.KindMessageChanged)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// Every action that changes a message appends one message_changed row per
// message it changed, in its own transaction: a replay names the
// original and the replay; a discard and a restore the message; a request
// applied before, or refused, appends nothing.
func TestActionsAppendMessageChanged(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	operator := b.login(t, auth.Operator)
	id, other := deadMessage(t, b, `{"n":1}`), deadMessage(t, b, `{"n":2}`)

	rid := uuid.NewString()
	rec := b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, rid, replayBody("redeliver", "", nil, rid))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var replay int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT id FROM switchyard.outbox WHERE replay_of = $1`, id).Scan(&replay))
	require.Equal(t, []string{itoa(id), itoa(replay)}, changedSubjects(t, b))

	// The same request again (a retry without the idempotency store's
	// answer: another key) and a refused second replay append nothing.
	again := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, again, replayBody("redeliver", "", nil, again))
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	require.Len(t, changedSubjects(t, b), 2)

	for _, action := range []string{"discard", "restore"} {
		rid := uuid.NewString()
		rec := b.api(http.MethodPost, "/api/messages/"+itoa(other)+"/"+action, operator, rid, map[string]string{"request_id": rid})
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	require.Equal(t, []string{itoa(id), itoa(replay), itoa(other), itoa(other)}, changedSubjects(t, b))
}

// The actions page's live re-fetch: the version the page shows answers
// 204 while nothing changed, and the page after a change; the message
// page's live regions show the replay.
func TestLiveRegionsOfAMessage(t *testing.T) {
	t.Parallel()
	b := setupAccess(t, false, nil, nil, nil)
	viewer, operator := b.login(t, auth.Viewer), b.login(t, auth.Operator)
	id := deadMessage(t, b, `{"n":3}`)
	page := "/messages/" + itoa(id) + "/actions"

	rec := b.request(http.MethodGet, page, viewer, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	seen, ok := doc.Find("#actions-seen").Attr("value")
	require.True(t, ok)
	trigger := doc.Find(`[data-testid="message-live"]`)
	require.Equal(t, 1, trigger.Length())
	require.Equal(t, "/events?kind=message_changed&subject="+itoa(id), trigger.Parent().AttrOr("sse-connect", ""))

	rec = b.request(http.MethodGet, page+"?seen="+seen, viewer, nil)
	require.Equal(t, http.StatusNoContent, rec.Code, "nothing changed")
	require.Empty(t, rec.Body.String())

	rid := uuid.NewString()
	rec = b.api(http.MethodPost, "/api/messages/"+itoa(id)+"/replay", operator, rid, replayBody("redeliver", "", nil, rid))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var replay int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT id FROM switchyard.outbox WHERE replay_of = $1`, id).Scan(&replay))

	rec = b.request(http.MethodGet, page+"?seen="+seen, viewer, nil)
	require.Equal(t, http.StatusOK, rec.Code, "the replay changed what the page shows")
	doc, err = goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	require.Equal(t, "Latest replay: message "+itoa(replay), doc.Find(`#actions-live [data-testid="last-replay"]`).Text())
	require.NotEqual(t, seen, doc.Find("#actions-seen").AttrOr("value", ""))

	rec = b.request(http.MethodGet, "/messages/"+itoa(id)+"/live", viewer, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err = goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	require.Equal(t, 1, doc.Find("#message-status").Length())
	require.Equal(t, 1, doc.Find(`#message-lineage a[href="/messages/`+itoa(replay)+`"]`).Length(), "the lineage links the replay")
	require.Equal(t, http.StatusNotFound, b.request(http.MethodGet, "/messages/999999/live", viewer, nil).Code)
}
