package console

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// cellErrorLen is how much of an error a table cell shows.
const cellErrorLen = 200

// messageRow maps a list row to its view.
func messageRow(r queries.SwitchyardConsoleMessage) templates.MessageRow {
	row := templates.MessageRow{
		ID: r.ID, MessageID: r.MessageID.String(), Topic: r.Topic, Destination: r.Destination,
		AggregateType: r.AggregateType, AggregateID: r.AggregateID, State: r.Status,
		Attempts: r.Attempts, CreatedAt: r.CreatedAt, ReplayOutcome: r.ReplayOutcome,
	}
	if r.LastError != nil {
		row.Error = shorten(*r.LastError, cellErrorLen)
	}
	if r.ReplayOf != nil {
		row.ReplayOf = *r.ReplayOf
	}
	if r.FinishedAt != nil {
		row.FinishedAt = *r.FinishedAt
	}
	return row
}

// messageStatus sets d's state to the console's (dead, replayed with its
// outcome, ...), as the lists show it, and a first try's lease holder from
// its stretch.
func messageStatus(ctx context.Context, q *queries.Queries, d *templates.MessageDetail) error {
	s, err := q.ConsoleMessageStatusGet(ctx, d.Row.ID)
	if err != nil {
		return fmt.Errorf("read the state of message %d: %w", d.Row.ID, err)
	}
	d.Row.State, d.Row.ReplayOutcome = s.Status, s.ReplayOutcome
	if d.LeaseOwner != "" || d.Row.State != "pending" || d.Row.Attempts != 0 {
		return nil
	}
	// A first try in flight is leased in its stretch, not on its row.
	stretch, err := q.ConsoleMessageStretchGet(ctx, d.Row.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read the stretch of message %d: %w", d.Row.ID, err)
	}
	d.LeaseOwner = stretch.Owner
	if stretch.LeasedUntil.After(d.NextAttemptAt) {
		d.NextAttemptAt = stretch.LeasedUntil // as an unordered retry's lease (messageDetail)
	}
	return nil
}

func messageRows(rs []queries.SwitchyardConsoleMessage) []templates.MessageRow {
	out := make([]templates.MessageRow, 0, len(rs))
	for _, r := range rs {
		out = append(out, messageRow(r))
	}
	return out
}

// shorten cuts s to at most n bytes at a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
