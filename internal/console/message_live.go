package console

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// messageLive serves GET /messages/:id/live: the live regions of a message
// page (its state and its replay lineage), which the page re-fetches when
// the message changes (a KindMessageChanged change for it on the stream),
// when the stream reconnects and when its tab comes back. Two small reads:
// the message and its replays.
func (h *Handler) messageLive(c echo.Context) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	m, err := q.ConsoleMessageGet(ctx, id)
	if err != nil {
		return notFound(err, "Message")
	}
	d := messageDetail(m)
	if err := messageStatus(ctx, q, &d); err != nil {
		return err
	}
	if d.Replays, err = messageReplays(ctx, q, m.ID); err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.MessageLive(d))
}

// messageReplays reads the newest replays of message id for its lineage.
func messageReplays(ctx context.Context, q *queries.Queries, id int64) ([]templates.MessageRow, error) {
	replays, err := q.ConsoleMessageReplayList(ctx, queries.ConsoleMessageReplayListParams{ID: &id, MaxRows: maxReplaysShown})
	if err != nil {
		return nil, fmt.Errorf("read replays of message %d: %w", id, err)
	}
	return messageRows(replays), nil
}
