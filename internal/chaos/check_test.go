package chaos

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
)

// The order check: a message's first accepted delivery must come after its
// predecessor's; a later redelivery of the predecessor is no violation.
func TestOrderViolations(t *testing.T) {
	t.Parallel()
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	rows := []committedRow{{a, "o-1", 1}, {b, "o-1", 2}, {c, "", 0}}
	assert.Zero(t, orderViolations(rows, map[uuid.UUID]int64{a: 1, b: 5, c: 0}), "in order; unordered ignored")
	assert.Equal(t, 1, orderViolations(rows, map[uuid.UUID]int64{a: 6, b: 5}), "b accepted before a")
	assert.Equal(t, 1, orderViolations(rows, map[uuid.UUID]int64{b: 5}), "b accepted, a never")
}

// The verdict fails on everything but duplicates.
func TestVerdictFailures(t *testing.T) {
	t.Parallel()
	assert.Empty(t, verdict{Messages: 10, Deliveries: 14, Duplicated: 4}.failures())
	assert.Equal(t, []string{"lost=1", "unexpected=2", "order_violations=3", "key_conflicts=4", "stale_finalizes=5"},
		verdict{Lost: 1, Unexpected: 2, OrderViolations: 3, KeyConflicts: 4, StaleFinalizes: 5}.failures())
}
