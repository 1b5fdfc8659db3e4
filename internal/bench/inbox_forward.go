package bench

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/inbox"
)

// The forward handler as a real gateway would set it up: a source whose
// row names the built-in forward handler, the destination it enqueues to,
// and an entity key (the customer's id), so that one customer's messages
// are delivered in the order their events were recorded. No dispatcher
// runs: the bench measures the receiver, and the messages stay pending.

// forwardSecretRef is the secret reference of the bench's forward source,
// resolved in-process to the run's secret (inboxBenchRun.receiver).
const forwardSecretRef = "SWITCHYARD_BENCH_INBOX_SECRET"

// forwardEntityField is the payload path the forward source orders by.
const forwardEntityField = "customer.id"

// forwardDestination is the destination the bench's forward source
// enqueues to.
func (t *benchTarget) forwardDestination() string { return "bench-forward-" + t.suffix }

// installForward adds the forward destination and the bench's forward
// source. In place, cleanup removes them with every row the bench wrote
// (the side by side's sources too); in a database of its own there is
// nothing to clean.
func installForward(ctx context.Context, t *benchTarget, logger *slog.Logger) (cleanup func(), err error) {
	// A function destination: never delivered to here (no dispatcher),
	// and it needs no secret.
	_, err = t.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ($1, 'function', 'bench')`, t.forwardDestination())
	if err != nil {
		return nil, fmt.Errorf("add the forward destination: %w", err)
	}
	if err := addForwardSource(ctx, t, t.inboxSource()); err != nil {
		deleteForwardBenchRows(ctx, t, logger)
		return nil, err
	}
	if t.created {
		return func() {}, nil
	}
	return func() { deleteForwardBenchRows(ctx, t, logger) }, nil
}

// addForwardSource adds source, forwarding to the bench's destination.
func addForwardSource(ctx context.Context, t *benchTarget, source string) error {
	_, err := t.pool.Exec(ctx, `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		source, inbox.SchemeStandardWebhooks, []string{forwardSecretRef}, inbox.HandlerForward, t.forwardDestination(), forwardEntityField)
	if err != nil {
		return fmt.Errorf("add the forward source %s: %w", source, err)
	}
	return nil
}

// checkForward confirms the forward source's effect: every unique event
// recorded once and forwarded as exactly one message (its own event id,
// its customer's aggregate, linked to the event), none for a redelivery,
// and every redelivery counted as a duplicate.
func (r *inboxBenchRun) checkForward(ctx context.Context) error {
	source, dest := r.source, r.target.forwardDestination()
	var events, messages, forwarded, aggregates, links, duplicates int
	err := r.target.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM switchyard.inbox_events WHERE source = $1 AND status = 'processed'),
		(SELECT count(*) FROM switchyard.outbox WHERE destination = $2 AND headers->>$4 = $1),
		(SELECT count(DISTINCT headers->>$3) FROM switchyard.outbox WHERE destination = $2 AND headers->>$4 = $1),
		(SELECT count(DISTINCT aggregate_id) FROM switchyard.outbox WHERE destination = $2 AND aggregate_type = 'inbox:' || $1),
		(SELECT count(*) FROM switchyard.inbox_event_messages m JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id WHERE e.source = $1),
		(SELECT coalesce(sum(count), 0) FROM switchyard.inbox_duplicates WHERE source = $1)`,
		source, dest, inbox.ForwardHeaderEventID, inbox.ForwardHeaderSource).
		Scan(&events, &messages, &forwarded, &aggregates, &links, &duplicates)
	if err != nil {
		return fmt.Errorf("check the inbox: %w", err)
	}
	got := []int{events, messages, forwarded, aggregates, links, duplicates}
	want := []int{r.unique, r.unique, r.unique, r.unique, r.unique, r.duplicates}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("check the inbox: %d events processed, %d messages of %d events and %d customers, %d linked, %d duplicates counted; want %d, %d, %d, %d, %d, %d",
				events, messages, forwarded, aggregates, links, duplicates, r.unique, r.unique, r.unique, r.unique, r.unique, r.duplicates)
		}
	}
	return nil
}

// deleteForwardBenchRows removes, in place, what a forward run wrote: the
// sources (the bench's, and a side by side's, which start with it and a
// dash) and destination, the events and the messages.
func deleteForwardBenchRows(ctx context.Context, t *benchTarget, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
	defer cancel()
	source, dest := t.inboxSource(), t.forwardDestination()
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		for _, s := range []struct {
			stmt string
			arg  string
		}{
			{`DELETE FROM switchyard.inbox_events WHERE source = $1 OR source LIKE $1 || '-%'`, source}, // and their links
			{`DELETE FROM switchyard.inbox_duplicates WHERE source = $1 OR source LIKE $1 || '-%'`, source},
			{`DELETE FROM switchyard.inbox_event_duplicates WHERE source = $1 OR source LIKE $1 || '-%'`, source},
			{`DELETE FROM switchyard.inbox_entity_versions WHERE source = $1 OR source LIKE $1 || '-%'`, source},
			{`DELETE FROM switchyard.inbox_sources WHERE name = $1 OR name LIKE $1 || '-%'`, source},
			{`DELETE FROM switchyard.outbox WHERE destination = $1`, dest},
			{`DELETE FROM switchyard.outbox_aggregates WHERE destination = $1`, dest},
			{`DELETE FROM switchyard.destinations WHERE name = $1`, dest},
		} {
			if _, err := tx.Exec(ctx, s.stmt, s.arg); err != nil {
				return fmt.Errorf("%s: %w", s.stmt, err)
			}
		}
		return nil
	})
	if err != nil {
		logger.Error("remove the inbox bench's rows", slog.String("source", source), slog.Any("error", err))
	}
}
