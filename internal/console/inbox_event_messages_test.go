package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/inbox"
)

// The page of an event from a 'sql' source lists the messages its
// function inserted into the outbox, each linking to the message, and
// none of a message enqueued by another transaction meanwhile.
func TestInboxEventPageListsTheMessagesASQLFunctionEnqueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `
		INSERT INTO switchyard.destinations (name, kind, address) VALUES ('warehouse', 'webhook', 'http://127.0.0.1:1/');
		INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('unrelated', 'warehouse', '{}');
		CREATE SCHEMA team;
		CREATE FUNCTION team.ship(event jsonb, headers jsonb) RETURNS void LANGUAGE sql AS $$
			INSERT INTO switchyard.outbox (topic, destination, payload)
			VALUES ('order.packed', 'warehouse', event::json), ('order.shipped', 'warehouse', event::json)
		$$;
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function)
		VALUES ('shop', 'standard-webhooks', '{SHOP_SECRET}', 'sql', 'team.ship');`)
	require.NoError(t, err)
	receiver := inbox.NewReceiver(inbox.ReceiverConfig{Pool: b.pool, Getenv: func(string) string { return shopSecret }})
	require.NoError(t, receiver.Load(ctx))
	body := []byte(`{"order": 7}`)
	res, err := receiver.Accept(ctx, "shop", shopHeaders(t, "evt_ship", time.Now(), body, shopSecret), body)
	require.NoError(t, err)
	require.Equal(t, inbox.OutcomeProcessed, res.Outcome)
	_, err = b.pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('unrelated', 'warehouse', '{}')`)
	require.NoError(t, err)

	var id int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM switchyard.inbox_events WHERE event_id = 'evt_ship'`).Scan(&id))
	rows, err := b.pool.Query(ctx, `SELECT id FROM switchyard.outbox WHERE topic <> 'unrelated' ORDER BY id`)
	require.NoError(t, err)
	messages, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, messages, 2)

	rec := b.do(t, http.MethodGet, fmt.Sprintf("/inbox/events/%d", id))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	require.NoError(t, err)
	listed := doc.Find("[data-testid=event-follow-through] [data-testid=event-message]")
	require.Equal(t, 2, listed.Length())
	for i, want := range []string{"order.packed", "order.shipped"} {
		row := listed.Eq(i)
		href, _ := row.Find("[data-testid=event-message-link]").Attr("href")
		require.Equal(t, fmt.Sprintf("/messages/%d", messages[i]), href)
		require.Contains(t, row.Text(), want)
		require.Equal(t, "pending", row.Find("[data-testid=event-message-state]").Text())
	}
	require.Zero(t, doc.Find("[data-testid=event-messages-none]").Length())
}
