package outbox

import (
	"context"
	"slices"
	"sync"

	"github.com/google/uuid"
)

// EnqueueRecord collects the ids of the messages that Enqueue writes under
// a context made by RecordEnqueued. It is how the inbox learns which
// messages an event's handler enqueued in the event's transaction (to link
// them to the event) without asking the database: a handler that
// enqueues nothing costs no statement. Safe for concurrent use.
type EnqueueRecord struct {
	mu  sync.Mutex
	ids []uuid.UUID // guarded by mu
}

type recordKey struct{}

// RecordEnqueued returns a context under which every Enqueue that succeeds
// appends its message ids to the returned record, in the order given. A
// message enqueued in a savepoint that is later rolled back stays in the
// record: whoever reads it must look the ids up in the transaction.
func RecordEnqueued(ctx context.Context) (context.Context, *EnqueueRecord) {
	r := &EnqueueRecord{}
	return context.WithValue(ctx, recordKey{}, r), r
}

// IDs returns a copy of the ids recorded so far.
func (r *EnqueueRecord) IDs() []uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// noteEnqueued adds ids to ctx's record, if it carries one.
func noteEnqueued(ctx context.Context, ids []uuid.UUID) {
	r, ok := ctx.Value(recordKey{}).(*EnqueueRecord)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, ids...)
}
