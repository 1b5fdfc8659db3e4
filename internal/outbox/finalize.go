package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
)

// genericPlanMost is the largest finalize statement sent as a prepared
// statement, run on its generic plan (sendGeneric). A larger one is
// planned for its arguments (customPlans): planning costs about 2 ms, while
// the generic plan's worst case, a rescan of the input for every message,
// grows with the square of the batch (0.4 ms at 32 messages, 530 ms at
// 1,024). Under offered load finalizes carry a few messages each, and
// planning every one of them took a third of a CPU at 1,000 messages a
// second.
const genericPlanMost = 32

// genericChunksMost is how many statements of at most genericPlanMost
// messages a finalize may be sent as, in one transaction and one round trip
// (genericChunks), before it is one statement planned for its arguments
// instead. Offered 5,000 messages a second, finalizes of 33 to 100
// messages were planned anew at nearly every call, 4.6 ms each on a busy
// server: a seventh of its CPU, which the enqueues needed (BENCHMARKS.md,
// "A faster machine, a finalize in statements of its generic plan's size,
// and each side at its best cooldown").
const genericChunksMost = 4

// statusMoreDue is OutboxFinalize's row (with no message) saying that an
// aggregate it moved on has more messages due at once.
const statusMoreDue = "more_due"

// finalize applies a batch's results, and moves on the aggregates they
// belong to, in one statement. Results whose lease (or whose aggregate's
// lease) was taken over meanwhile change nothing (fencing); they are
// counted and logged as stale. busy are the results it could not apply yet
// because an enqueuing transaction holds their aggregate's row: finalize
// them again later. moreDue says that messages are due at once because of
// it: an aggregate it moved on has more, or an unordered message was given
// back without a delay.
func (d *Dispatcher) finalize(ctx context.Context, worker string, results []result) (busy []result, moreDue bool, err error) {
	// A third of the lease. The heartbeat extends only deliveries in
	// flight: a result holds what its lease had left when it landed, at
	// least two thirds of a lease after a heartbeat on time, while it
	// waits for the worker's finalize in flight and then for its own. Only
	// when both run into this timeout can its lease run out first; its
	// finalize is then stale, changes nothing, and the message is
	// delivered again: at least once, as after any lost lease.
	ctx, cancel := context.WithTimeout(ctx, d.cfg.LeaseDuration/3)
	defer cancel()
	var rows []queries.OutboxFinalizeRow
	done := d.stretches.finalizing(results)
	if chunks := genericChunks(results); chunks != nil {
		rows, err = d.finalizeChunks(ctx, worker, chunks, done)
	} else {
		rows, err = queries.New(customPlans{d.pool}).OutboxFinalize(ctx, d.finalizeParams(worker, results, done))
	}
	if err != nil {
		d.stretches.failed(results)
		return nil, false, fmt.Errorf("finalize %d messages: %w", len(results), err)
	}
	status := make(map[int64]string, len(rows))
	for _, row := range rows {
		status[row.ID] = row.Status
		moreDue = moreDue || row.Status == statusMoreDue
	}
	for _, r := range results {
		switch {
		case status[r.msg.ID] == "busy":
			busy = append(busy, r)
		case r.msg.AggregateID == "" && status[r.msg.ID] == "applied" &&
			(r.outcome == outcomeReleased || r.outcome == outcomeRetry) && r.retryDelay <= 0:
			// An unordered message given back, due at once (an ordered one
			// is due when its aggregate is: statusMoreDue), maybe behind
			// where its destination's claims start.
			moreDue = true
			d.marks.forget(r.msg.Destination)
		}
	}
	if d.count(results, status) {
		d.cfg.Changed()
	}
	return busy, moreDue, nil
}

// genericChunks splits results into finalize statements of at most
// genericPlanMost messages, each aggregate's results and each unordered
// delivery's whole in one of them (one statement moves an aggregate on,
// from all that its deliveries did), and every dead result in one of them,
// at most genericChunksMost of them. Where that cannot be done it returns
// nil: the finalize is one statement, planned for its arguments.
//
// The dead results together: a statement upserts the dead-letter groups
// (and hours) of its dead messages in the order of their fingerprints, so
// that two finalizes never wait for each other's groups in opposite
// orders. Spread over several statements of one transaction, each would
// take its own in that order but not the whole transaction's, and two
// finalizes could deadlock.
func genericChunks(results []result) [][]result {
	if len(results) <= genericPlanMost {
		return [][]result{results}
	}
	if len(results) > genericChunksMost*genericPlanMost {
		return nil
	}
	// The results of an aggregate, or of an unordered delivery, in the
	// order they first appear.
	type wholeKey struct {
		aggregate aggregateKey
		delivery  uint64
	}
	index := make(map[wholeKey]int)
	var wholes [][]result
	for _, r := range results {
		k := wholeKey{delivery: r.delivery}
		if r.msg.AggregateID != "" {
			k = wholeKey{aggregate: keyOf(r.msg)}
		}
		i, ok := index[k]
		if !ok {
			i = len(wholes)
			index[k] = i
			wholes = append(wholes, nil)
		}
		wholes[i] = append(wholes[i], r)
	}
	wholes = deadTogether(wholes)
	var chunks [][]result
	var chunk []result
	for _, whole := range wholes {
		if len(whole) > genericPlanMost {
			return nil
		}
		if len(chunk)+len(whole) > genericPlanMost {
			chunks = append(chunks, chunk)
			chunk = nil
		}
		chunk = append(chunk, whole...)
	}
	chunks = append(chunks, chunk)
	if len(chunks) > genericChunksMost {
		return nil
	}
	return chunks
}

// deadTogether merges the wholes that hold a dead result into one, where
// the first of them was (genericChunks).
func deadTogether(wholes [][]result) [][]result {
	merged := make([][]result, 0, len(wholes))
	dead := -1
	for _, whole := range wholes {
		if !slices.ContainsFunc(whole, func(r result) bool { return r.outcome == outcomeDead }) {
			merged = append(merged, whole)
			continue
		}
		if dead < 0 {
			dead = len(merged)
			merged = append(merged, nil)
		}
		merged[dead] = append(merged[dead], whole...)
	}
	return merged
}

// finalizeChunks finalizes each chunk in a statement of its own, on the
// statement's generic plan, all in one transaction sent in one round trip
// (sendGeneric): one commit, and no statement planned for its arguments. A
// statement that fails aborts the transaction, and none of the chunks is
// applied, as when the finalize is one statement. The last chunk deletes
// the stretches done, after the others applied their messages.
func (d *Dispatcher) finalizeChunks(ctx context.Context, worker string, chunks [][]result, doneStretches []int64) ([]queries.OutboxFinalizeRow, error) {
	var rows []queries.OutboxFinalizeRow
	err := sendGeneric(ctx, d.pool, func(b *pgx.Batch) error {
		for i, chunk := range chunks {
			var done []int64
			if i == len(chunks)-1 {
				done = doneStretches
			}
			_, err := queries.New(queueing{batch: b}).OutboxFinalize(ctx, d.finalizeParams(worker, chunk, done))
			if !errors.Is(err, errQueued) {
				return fmt.Errorf("queue a finalize of %d messages: %w", len(chunk), err)
			}
		}
		return nil
	}, func(results pgx.BatchResults) error {
		for range chunks {
			part, err := queries.New(nextResult{results: results}).OutboxFinalize(ctx, queries.OutboxFinalizeParams{})
			if err != nil {
				return err
			}
			rows = append(rows, part...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// finalizeParams are OutboxFinalize's parallel arrays for the results and
// the aggregates they move on, and the stretches it deletes (doneStretches).
func (d *Dispatcher) finalizeParams(worker string, results []result, doneStretches []int64) queries.OutboxFinalizeParams {
	p := queries.OutboxFinalizeParams{Worker: worker, Now: d.now(), DoneStretches: doneStretches}
	aggregates := aggregateOutcomes(results)
	position := make(map[aggregateKey]int32, len(aggregates))
	for i, a := range aggregates {
		position[a.key] = int32(i + 1)
	}
	for _, r := range results {
		if r.msg.AggregateID == "" {
			p.AggregateOf = append(p.AggregateOf, 0)
		} else {
			p.AggregateOf = append(p.AggregateOf, position[keyOf(r.msg)])
		}
		p.Ids = append(p.Ids, r.msg.ID)
		p.LeaseVersions = append(p.LeaseVersions, r.msg.LeaseVersion)
		p.AttemptNumbers = append(p.AttemptNumbers, r.msg.Attempts)
		p.Outcomes = append(p.Outcomes, r.outcome)
		p.RetryDelaysMs = append(p.RetryDelaysMs, float64(r.retryDelay)/float64(time.Millisecond))
		p.AttemptDeltas = append(p.AttemptDeltas, r.msg.attemptDelta(r.outcome))
		p.Errors = append(p.Errors, r.err)
		p.Fingerprints = append(p.Fingerprints, r.fingerprint)
		p.StatusCodes = append(p.StatusCodes, int32(r.outcomeInfo.StatusCode))
		p.Responses = append(p.Responses, r.outcomeInfo.Response)
		p.StartedAts = append(p.StartedAts, r.started)
		p.FinishedAts = append(p.FinishedAts, r.finished)
	}
	for _, a := range aggregates {
		p.AggregatePositions = append(p.AggregatePositions, position[a.key])
		p.AggregateDestinations = append(p.AggregateDestinations, a.key.destination)
		p.AggregateTypes = append(p.AggregateTypes, a.key.aggregateType)
		p.AggregateIds = append(p.AggregateIds, a.key.aggregateID)
		p.AggregateLeaseVersions = append(p.AggregateLeaseVersions, a.leaseVersion)
		p.AggregateDoneSeqs = append(p.AggregateDoneSeqs, a.doneSeq)
		p.AggregateDueInMs = append(p.AggregateDueInMs, float64(a.dueIn)/float64(time.Millisecond))
		p.AggregateBlocked = append(p.AggregateBlocked, a.blocked)
	}
	return p
}

// count updates the metrics and logs stale finalizes. It reports whether
// the finalize appended to the change feed: a message went dead, or a
// replay settled (status applied_replay).
func (d *Dispatcher) count(results []result, status map[int64]string) (fed bool) {
	for _, r := range results {
		switch status[r.msg.ID] {
		case "busy":
			continue
		case "applied":
		case "applied_replay":
			fed = true
		default:
			d.cfg.Metrics.staleFinalizes.WithLabelValues(r.msg.Destination).Inc()
			d.cfg.Logger.Warn("stale finalize: lease taken over, outcome not applied",
				slog.Int64("message", r.msg.ID), slog.Int64("lease_version", r.msg.LeaseVersion),
				slog.String("outcome", r.outcome))
			continue
		}
		d.cfg.Metrics.outcomes.WithLabelValues(r.msg.Destination, r.outcome).Inc()
		fed = fed || r.outcome == outcomeDead
	}
	return fed
}
