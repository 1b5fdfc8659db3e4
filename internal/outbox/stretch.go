package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/advisory"
	"github.com/switchyard/switchyard/internal/queries"
)

// A stretch is one unordered claim's lease on the first tries it took of
// one destination: one row of their ids (migrations/00033_outbox_stretches.sql),
// where each message's row took a lease of its own. Its messages are
// delivered as any others; their attempt is counted at their finalize
// (claimedMessage.Counted false), and the finalize of the last of them
// deletes the stretch (stretchCounts). The heartbeat extends it as it
// extends a message's lease (flight.keys).

// claimTurnNamespace is the advisory lock namespace of the unordered
// claims' turns, one lock per destination (OutboxClaimTurn).
const claimTurnNamespace = "switchyard.outbox.unordered_claim"

// claimTurnKeys are the advisory lock keys of destinations' unordered
// claims, sorted: every claim takes them in the same order.
func claimTurnKeys(destinations []string) []int64 {
	keys := make([]int64, len(destinations))
	for i, name := range destinations {
		keys[i] = advisory.Key(claimTurnNamespace, name)
	}
	slices.Sort(keys)
	return keys
}

// runUnorderedClaim sends the unordered claim after its destinations'
// turns (OutboxClaimTurn), in one transaction: the claim writes none of
// the first tries it leases, so two claims of a destination read side by
// side would lease the same ones. The claim's snapshot, taken when its
// statement starts, follows the locks and sees every stretch committed
// before them. Prepared (claimModeNow), the two statements go out as one
// pipeline on the claims' own connections, which pgx sends with one Sync:
// an implicit transaction, one round trip, as the claim alone was. Planned
// for its arguments, they run in a transaction of their own (a pipeline
// runs its statements in the connection's mode: prepared).
func runUnorderedClaim(ctx context.Context, d *Dispatcher, p queries.OutboxClaimUnorderedParams) ([]queries.OutboxClaimUnorderedRow, error) {
	keys := claimTurnKeys(p.Destinations)
	if d.claimModeNow() == claimPlanned {
		var rows []queries.OutboxClaimUnorderedRow
		err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			if _, err := queries.New(tx).OutboxClaimTurn(ctx, keys); err != nil {
				return fmt.Errorf("take the destinations' turns: %w", err)
			}
			var err error
			rows, err = queries.New(customPlans{tx}).OutboxClaimUnordered(ctx, p)
			return err
		})
		return rows, err
	}
	pool, err := d.claimPool()
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	if _, err := queries.New(queueing{batch: b}).OutboxClaimTurn(ctx, keys); !errors.Is(err, errQueued) {
		return nil, fmt.Errorf("queue the destinations' turns: %w", err)
	}
	if _, err := queries.New(queueing{batch: b}).OutboxClaimUnordered(ctx, p); !errors.Is(err, errQueued) {
		return nil, fmt.Errorf("queue the claim: %w", err)
	}
	results := pool.SendBatch(ctx, b)
	next := queries.New(nextResult{results: results})
	if _, err := next.OutboxClaimTurn(ctx, nil); err != nil {
		return nil, closeAfter(fmt.Errorf("take the destinations' turns: %w", err), results)
	}
	rows, err := next.OutboxClaimUnordered(ctx, queries.OutboxClaimUnorderedParams{})
	if err != nil {
		return nil, closeAfter(err, results)
	}
	// Close reads up to the pipeline's end: the implicit transaction's
	// commit. Its rows are handed on only once it has committed.
	if err := results.Close(); err != nil {
		return nil, err
	}
	return rows, nil
}

// stretchCounts counts, per stretch, its messages leased for delivery and
// not yet in a finalize: the finalize that takes the count of a stretch to
// zero deletes it, in the same transaction (finalizeParams). A stretch's
// deliveries are one worker's, whose finalizes run one at a time, so the
// one that deletes it commits after every other finalize of its messages:
// none of them can be claimed again while one of its deliveries is still
// being finalized. A finalize that fails leaves its stretches to run out
// (a claim then counts the attempt of each message still untried).
type stretchCounts struct {
	mu   sync.Mutex
	left map[int64]int // guarded by mu
}

// leased counts the stretch messages of groups, which a claim leased for
// delivery.
func (s *stretchCounts) leased(groups []group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range groups {
		for _, m := range g.msgs {
			if m.Stretch == 0 {
				continue
			}
			if s.left == nil {
				s.left = make(map[int64]int)
			}
			s.left[m.Stretch]++
		}
	}
}

// finalizing counts down the stretch messages of results, which go to a
// finalize, and returns the stretches that have none left: that finalize
// deletes them.
func (s *stretchCounts) finalizing(results []result) (done []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		id := r.msg.Stretch
		if id == 0 {
			continue
		}
		left, ok := s.left[id]
		if !ok { // a finalize of its messages failed: it runs out
			continue
		}
		if left <= 1 {
			delete(s.left, id)
			done = append(done, id)
			continue
		}
		s.left[id] = left - 1
	}
	return done
}

// failed forgets the stretches of results, whose finalize failed: their
// leases run out instead.
func (s *stretchCounts) failed(results []result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		delete(s.left, r.msg.Stretch)
	}
}

// releaseStretched gives back first tries of stretches that the claim
// leased and will not deliver (its excess): they leave their stretches,
// their rows untouched (OutboxStretchesRelease), and are due again at once.
// If it fails, their stretches run out instead.
func (d *Dispatcher) releaseStretched(ctx context.Context, worker string, msgs []claimedMessage) {
	if len(msgs) == 0 {
		return
	}
	p := queries.OutboxStretchesReleaseParams{}
	var destinations []string
	for _, m := range msgs {
		p.Ids = append(p.Ids, m.ID)
		if !slices.Contains(p.Stretches, m.Stretch) {
			p.Stretches = append(p.Stretches, m.Stretch)
		}
		if !slices.Contains(destinations, m.Destination) {
			destinations = append(destinations, m.Destination)
		}
	}
	if err := queries.New(d.pool).OutboxStretchesRelease(ctx, p); err != nil {
		d.cfg.Logger.Error("release of a claim's excess first tries failed", slog.String("worker", worker), slog.Any("error", err))
		return
	}
	for _, name := range destinations {
		// Behind where the destination's claims start.
		d.marks.forget(name)
	}
	d.Wake()
}

// splitStretched splits msgs into those leased one by one (retries) and
// first tries leased in stretches.
func splitStretched(msgs []claimedMessage) (retries, firsts []claimedMessage) {
	for _, m := range msgs {
		if m.Stretch == 0 {
			retries = append(retries, m)
		} else {
			firsts = append(firsts, m)
		}
	}
	return retries, firsts
}
