package triage

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
)

// Notes: at most 8 KiB; their author may edit them within ten minutes
// (on the database clock); every version is kept.
func TestNotesEditedByTheirAuthorWithinTenMinutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	alice, bob := account(t, pool, "alice", auth.Operator), account(t, pool, "bob", auth.Operator)
	clock := newClock(t, pool)
	engine := &Engine{Pool: pool, Now: clock.now}

	tooLong := mutate(t, engine, alice, item.ID, OpNote, Args{Body: strings.Repeat("x", MaxNoteBytes+1)}, 0)
	require.Equal(t, RejectInvalid, tooLong.Reason)
	added := mutate(t, engine, alice, item.ID, OpNote, Args{Body: "<b>upstream</b> returns 422"}, 0)
	require.True(t, added.OK, added.Message)
	var detail struct {
		NoteID int64 `json:"note_id"`
	}
	require.NoError(t, json.Unmarshal(added.Detail, &detail))

	require.Equal(t, RejectNotAuthor, mutate(t, engine, bob, item.ID, OpNoteEdit, Args{NoteID: detail.NoteID, Body: "mine now"}, 0).Reason)
	edited := mutate(t, engine, alice, item.ID, OpNoteEdit, Args{NoteID: detail.NoteID, Body: "upstream returns 422 for v2 orders"}, 0)
	require.True(t, edited.OK, edited.Message)
	clock.move(NoteEditWindow + time.Second)
	require.Equal(t, RejectEditWindow, mutate(t, engine, alice, item.ID, OpNoteEdit, Args{NoteID: detail.NoteID, Body: "late"}, 0).Reason)

	notes, err := Notes(ctx, pool, item.ID)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	require.Equal(t, "upstream returns 422 for v2 orders", notes[0].Body)
	require.Equal(t, int32(1), notes[0].Edits)
	require.Equal(t, 2, count(t, pool, "SELECT count(*) FROM switchyard.triage_note_versions WHERE note_id = $1", detail.NoteID), "every version is kept")
	_, err = pool.Exec(ctx, "UPDATE switchyard.triage_note_versions SET body = 'rewritten'")
	require.ErrorContains(t, err, "append-only")
}

// A replay started from an item goes through the outbox's replay
// machinery in the mutation's transaction: one replay per dead message of
// the group, and the same mutation again creates none.
func TestReplayFromAnItemGoesThroughTheOutbox(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	killDead(t, pool, 2, message(""), message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	alice := account(t, pool, "alice", auth.Operator)
	in := Input{MutationID: uuid.New(), ItemID: item.ID, Op: OpReplay, Args: Args{Reason: "fixed"}, SeenVersion: item.Version}
	for range 2 {
		a, err := Mutate(context.Background(), pool, alice, in)
		require.NoError(t, err)
		require.True(t, a.OK, a.Message)
		require.JSONEq(t, `{"mode": "redeliver", "messages": 2, "replayed": 2}`, string(a.Detail))
	}
	require.Equal(t, 2, count(t, pool, "SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL AND state = 'pending'"))
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.audit_log WHERE action = 'triage.replay'"))

	resolved := mutate(t, &Engine{Pool: pool}, alice, item.ID, OpStatus, Args{Status: Resolved}, item.Version+1)
	require.True(t, resolved.OK, resolved.Message)
	require.Equal(t, RejectNotReplayable, mutate(t, &Engine{Pool: pool}, alice, item.ID, OpReplay, Args{}, resolved.Item.Version).Reason)
}

// Track is the reconciler's way in: it creates an item once and reopens
// it when settled; an ignore with an "until" ahead holds through a
// recurrence.
func TestTrackCreatesOnceAndHonoursIgnoreUntil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	alice := account(t, pool, "alice", auth.Operator)
	ref := json.RawMessage(`{"check": "stripe-customers", "class": "missing_remotely"}`)
	track := func() {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return Track(ctx, tx, ReconcileFindings, ref, "customers missing at Stripe", "3 new findings")
		}))
	}
	track()
	track()
	item := onlyItem(t, pool, ReconcileFindings)
	require.Equal(t, int64(1), item.Version, "a recurrence of an open item changes nothing")

	until := time.Now().Add(time.Hour)
	ignored := mutate(t, &Engine{Pool: pool}, alice, item.ID, OpStatus, Args{Status: Ignored, Until: &until}, item.Version)
	require.True(t, ignored.OK, ignored.Message)
	track()
	got, err := Get(ctx, pool, item.ID)
	require.NoError(t, err)
	require.Equal(t, Ignored, got.Status, "ignored until a time ahead")

	reopened := mutate(t, &Engine{Pool: pool}, alice, item.ID, OpStatus, Args{Status: Open}, got.Version)
	require.True(t, reopened.OK, reopened.Message)
	forever := mutate(t, &Engine{Pool: pool}, alice, item.ID, OpStatus, Args{Status: Ignored}, reopened.Item.Version)
	require.True(t, forever.OK, forever.Message)
	track()
	got, err = Get(ctx, pool, item.ID)
	require.NoError(t, err)
	require.Equal(t, Open, got.Status, "an ignore without until lasts until the failure returns")
}

// The lifecycle's transitions: active statuses settle, settled ones only
// reopen.
func TestStatusTransitions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to Status
		ok       bool
	}{
		{Open, Acknowledged, true}, {Open, Resolved, true}, {Acknowledged, Investigating, true},
		{Investigating, Ignored, true}, {Resolved, Open, true}, {Ignored, Open, true},
		{Resolved, Investigating, false}, {Ignored, Resolved, false}, {Open, Open, false}, {Open, "bogus", false},
	}
	for _, c := range cases {
		_, rej, err := setStatus(change{detail: map[string]any{}}, Item{Status: c.from}, time.Now(), Input{Args: Args{Status: c.to}})
		require.NoError(t, err)
		require.Equal(t, c.ok, rej == nil, "%s → %s", c.from, c.to)
	}
}

func TestPruneMutationsKeepsRecentAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.triage_mutations (account_id, mutation_id, request_hash, created_at)
		VALUES (1, gen_random_uuid(), '\x00', now() - interval '2 days'), (1, gen_random_uuid(), '\x00', now())`)
	require.NoError(t, err)
	n, err := PruneMutations(ctx, pool, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.triage_mutations"))
}
