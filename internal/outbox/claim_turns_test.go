package outbox

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// claimOverlap is a pgx QueryTracer (a pool's ConnConfig.Tracer) that
// counts each kind of claim in flight, and the most of it there ever were
// at once. Each claim is held back 5 ms before it is sent: not a wait for
// anything, only a window wide enough that claims sent side by side
// overlap in it on any machine (the workers' first claims all go at the
// dispatcher's start).
type claimOverlap struct {
	mu       sync.Mutex
	inFlight map[string]int
	most     map[string]int
	sent     map[string]int
}

type claimKindKey struct{}

// claimKinds are the statements claimOverlap counts, by the name sqlc
// puts in their first line.
var claimKinds = []string{"OutboxClaimUnordered", "OutboxClaimOrdered"}

func newClaimOverlap() *claimOverlap {
	return &claimOverlap{inFlight: map[string]int{}, most: map[string]int{}, sent: map[string]int{}}
}

func (c *claimOverlap) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	for _, kind := range claimKinds {
		if strings.Contains(data.SQL, "-- name: "+kind+" ") {
			c.mu.Lock()
			c.inFlight[kind]++
			c.sent[kind]++
			c.most[kind] = max(c.most[kind], c.inFlight[kind])
			c.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			return context.WithValue(ctx, claimKindKey{}, kind)
		}
	}
	return ctx
}

func (c *claimOverlap) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if kind, ok := ctx.Value(claimKindKey{}).(string); ok {
		c.mu.Lock()
		c.inFlight[kind]--
		c.mu.Unlock()
	}
}

// A dispatcher's claims of one kind take turns: claims sent side by side
// would read the same rows first and step over each other's locked rows
// (Dispatcher.unorderedTurn, orderedTurn). Every message is still
// delivered exactly once, in order within its aggregate.
func TestADispatchersClaimsOfOneKindTakeTurns(t *testing.T) {
	t.Parallel()
	const messages = 2000
	conf, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	overlap := newClaimOverlap()
	conf.ConnConfig.Tracer = overlap
	pool, err := pgxpool.NewWithConfig(context.Background(), conf)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addDestinations(t, pool, "alpha")
	// Ten ordered messages in each of 100 aggregates.
	enqueue(t, pool, mixedMessages(messages, 100)...)
	dest := newFlaky(0, 0)
	deliverAll(t, pool, dest, messages)

	overlap.mu.Lock()
	defer overlap.mu.Unlock()
	for _, kind := range claimKinds {
		require.Greater(t, overlap.sent[kind], 8, "the workers sent many claims of %s", kind)
		require.Equal(t, 1, overlap.most[kind], "no two claims of %s in flight at once", kind)
	}
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Empty(t, dest.violations)
	require.Len(t, dest.delivered, messages)
	for id, n := range dest.delivered {
		require.Equal(t, 1, n, "message %s acknowledged more than once", id)
	}
}

// A worker waits for another's claim no longer than its own claim's
// context lets it, and a turn given back can be taken again.
func TestATurnIsWaitedForUnderTheClaimsContext(t *testing.T) {
	t.Parallel()
	turn := make(chan struct{}, 1)
	release, err := takeTurn(context.Background(), turn)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = takeTurn(ctx, turn)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the turn is held: the wait ends with the claim's deadline")
	release()
	again, err := takeTurn(context.Background(), turn)
	require.NoError(t, err, "a turn given back is free again")
	again()
}
