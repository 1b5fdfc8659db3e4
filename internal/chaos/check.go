package chaos

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// verdict is the checker's count of what went wrong; every field but
// Duplicated fails the run when above zero.
type verdict struct {
	Messages        int `json:"messages"`
	Deliveries      int `json:"deliveries"`
	Lost            int `json:"lost"`
	Unexpected      int `json:"unexpected"`
	Duplicated      int `json:"duplicated"`
	OrderViolations int `json:"order_violations"`
	KeyConflicts    int `json:"key_conflicts"`
	StaleFinalizes  int `json:"stale_finalizes"`
}

// plus adds o's counts to v's.
func (v verdict) plus(o verdict) verdict {
	return verdict{Messages: v.Messages + o.Messages, Deliveries: v.Deliveries + o.Deliveries, Lost: v.Lost + o.Lost,
		Unexpected: v.Unexpected + o.Unexpected, Duplicated: v.Duplicated + o.Duplicated,
		OrderViolations: v.OrderViolations + o.OrderViolations, KeyConflicts: v.KeyConflicts + o.KeyConflicts,
		StaleFinalizes: v.StaleFinalizes + o.StaleFinalizes}
}

func (v verdict) failures() []string {
	var out []string
	for _, f := range []struct {
		name string
		n    int
	}{{"lost", v.Lost}, {"unexpected", v.Unexpected}, {"order_violations", v.OrderViolations},
		{"key_conflicts", v.KeyConflicts}, {"stale_finalizes", v.StaleFinalizes}} {
		if f.n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", f.name, f.n))
		}
	}
	return out
}

// committedRow is a message the database holds, with its place in its
// aggregate.
type committedRow struct {
	id        uuid.UUID
	aggregate string
	seq       int64
}

// check compares the history the receiver recorded with what the database
// committed and what the enqueuer saw acknowledged:
//   - lost: committed (in the database, or acknowledged) and never accepted;
//   - unexpected: accepted, and not a message the database holds;
//   - duplicated: accepted more than once (counted, not a failure);
//   - key conflicts: one message delivered under two idempotency keys;
//   - order violations: a message of an aggregate accepted before its
//     predecessor's first accepted delivery;
//   - stale finalizes: a message that more than one finalize marked
//     delivered (a finalize under a lost lease that still changed a row).
func check(ctx context.Context, pool *pgxpool.Pool, destination string, seen []delivery, acknowledged map[uuid.UUID]bool) (verdict, error) {
	rows, err := committed(ctx, pool, destination)
	if err != nil {
		return verdict{}, err
	}
	v := verdict{Messages: len(rows), Deliveries: len(seen)}
	inDB := make(map[uuid.UUID]bool, len(rows))
	for _, r := range rows {
		inDB[r.id] = true
	}
	for id := range acknowledged {
		if !inDB[id] {
			v.Lost++ // acknowledged, yet the database does not have it
		}
	}
	first := map[uuid.UUID]int64{}
	accepted := map[uuid.UUID]int{}
	keys := map[uuid.UUID]map[string]bool{}
	for _, d := range seen {
		id, err := uuid.Parse(d.ID)
		if err != nil || !inDB[id] {
			if d.Accepted {
				v.Unexpected++
			}
			continue
		}
		if keys[id] == nil {
			keys[id] = map[string]bool{}
		}
		keys[id][d.Key] = true
		if !d.Accepted {
			continue
		}
		if accepted[id] == 0 {
			first[id] = d.Order
		}
		accepted[id]++
	}
	for _, r := range rows {
		switch n := accepted[r.id]; {
		case n == 0:
			v.Lost++
		case n > 1:
			v.Duplicated += n - 1
		}
		if len(keys[r.id]) > 1 {
			v.KeyConflicts++
		}
	}
	v.OrderViolations = orderViolations(rows, first)
	// A finalize that applied a stale delivery shows as a second applied
	// delivered attempt in the log, or (the delivered attempt being kept on
	// the message's row, once) as a delivery counted twice in the
	// statistics, which count every applied delivery.
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (
			SELECT a.message_id FROM switchyard.outbox_attempt_log a JOIN switchyard.outbox o ON o.id = a.message_id
			WHERE o.destination = $1 AND a.applied AND a.outcome = 'delivered'
			GROUP BY a.message_id HAVING count(*) > 1) s)
		+ greatest((SELECT coalesce(sum(delivered), 0) FROM switchyard.delivery_stats WHERE destination = $1)
			- (SELECT count(*) FROM switchyard.outbox WHERE destination = $1 AND state = 'delivered'), 0)`,
		destination).Scan(&v.StaleFinalizes); err != nil {
		return v, fmt.Errorf("count finalizes that marked a message delivered twice: %w", err)
	}
	return v, nil
}

func committed(ctx context.Context, pool *pgxpool.Pool, destination string) ([]committedRow, error) {
	rows, err := pool.Query(ctx, `SELECT message_id, aggregate_id, coalesce(aggregate_seq, 0)
		FROM switchyard.outbox WHERE destination = $1`, destination)
	if err != nil {
		return nil, fmt.Errorf("read the committed messages: %w", err)
	}
	defer rows.Close()
	var out []committedRow
	for rows.Next() {
		var r committedRow
		if err := rows.Scan(&r.id, &r.aggregate, &r.seq); err != nil {
			return nil, fmt.Errorf("read the committed messages: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// orderViolations counts the messages of an aggregate whose first accepted
// delivery came before their predecessor's.
func orderViolations(rows []committedRow, first map[uuid.UUID]int64) int {
	byAggregate := map[string][]committedRow{}
	for _, r := range rows {
		if r.aggregate != "" {
			byAggregate[r.aggregate] = append(byAggregate[r.aggregate], r)
		}
	}
	violations := 0
	for _, msgs := range byAggregate {
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].seq < msgs[j].seq })
		for i := 1; i < len(msgs); i++ {
			prev, okPrev := first[msgs[i-1].id]
			cur, ok := first[msgs[i].id]
			if ok && (!okPrev || cur < prev) {
				violations++
			}
		}
	}
	return violations
}
