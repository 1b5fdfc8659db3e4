package triage

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/testwait"
)

// A new dead letter of the group that commits while a resolve of its item
// is in flight reopens the item once the resolve commits: the failure is
// not hidden behind the resolve, and the dispatcher's commit does not wait
// for the resolve. The resolve is held right after it locked the item
// (before it writes), or after its write, just before its commit (by the
// audit trail's chain lock, which the test takes first).
func TestFailureDuringAResolveReopensTheItem(t *testing.T) {
	t.Parallel()
	for _, held := range []string{"after the lock", "before the commit"} {
		t.Run(held, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := setup(t)
			killDead(t, pool, 1, message(""))
			item := onlyItem(t, pool, DeadLetterGroup)
			alice := account(t, pool, "alice", auth.Operator)
			engine := &Engine{Pool: pool}
			locked, resume := make(chan struct{}), make(chan struct{})
			release := func() { close(resume) }
			if held == "after the lock" {
				engine.afterLock = func() {
					close(locked)
					<-resume
				}
			} else {
				hold, err := pool.Begin(ctx)
				require.NoError(t, err)
				release = func() { require.NoError(t, hold.Rollback(ctx)) }
				_, err = hold.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('switchyard.audit_log', 0))")
				require.NoError(t, err)
			}
			done := make(chan Answer, 1)
			go func() {
				a, err := engine.Mutate(ctx, alice, Input{MutationID: uuid.New(), ItemID: item.ID, Op: OpStatus,
					Args: Args{Status: Resolved, Reason: "fixed upstream"}, SeenVersion: item.Version})
				if err != nil {
					t.Errorf("resolve: %v", err)
				}
				done <- a
			}()
			if held == "after the lock" {
				testwait.For(t, 30*time.Second, "the resolve to lock the item", locked)
			} else {
				testwait.Until(t, 30*time.Second, "the resolve to wait before its commit", func() bool {
					return count(t, pool, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
						WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`) == 1
				})
			}
			killDead(t, pool, 2, message("")) // commits meanwhile, without waiting for the resolve
			release()
			resolved := testwait.For(t, 30*time.Second, "the resolve's answer", done)
			require.True(t, resolved.OK, resolved.Message)

			testwait.Until(t, 30*time.Second, "the item reopened", func() bool {
				got, err := Get(ctx, pool, item.ID)
				require.NoError(t, err)
				return got.Status == Open
			})
			history, err := History(ctx, pool, item.ID)
			require.NoError(t, err)
			last := history[len(history)-1]
			require.Equal(t, "reopened", last.Op)
			require.Equal(t, resolved.Item.Version+1, last.Version)
			require.Contains(t, string(last.Detail), "a new dead letter in the group")
			require.Zero(t, count(t, pool, "SELECT count(*) FROM switchyard.triage_reopen_pending"), "nothing left to reopen")
		})
	}
}
