package triage

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// MaxNoteBytes bounds a note's text (the table enforces it too).
const MaxNoteBytes = 8192

// NoteEditWindow is how long after writing a note its author may edit it.
const NoteEditWindow = 10 * time.Minute

// MaxReplayMessages bounds a replay started from an item: one
// transaction, so a group larger than this is replayed in several
// mutations (or by a bulk replay job).
const MaxReplayMessages = 1000

// apply runs the op on cur, the locked item, at now (the database clock).
// A refusal is a non-nil *Answer; an error means the transaction failed.
func (e *Engine) apply(ctx context.Context, tx pgx.Tx, cur Item, now time.Time, actor auth.Principal, in Input) (change, *Answer, error) {
	ch := change{next: base(cur, now), event: string(in.Op), detail: map[string]any{}}
	switch in.Op {
	case OpClaim:
		return e.claim(ch, cur, now, actor, in)
	case OpRelease:
		if !cur.ClaimedAt(now) || *cur.ClaimHolderID != actor.UserID {
			return ch, reject(cur, RejectNotHolder, "You do not hold this item's claim."), nil
		}
		ch.next.ClaimHolderID, ch.next.ClaimHolderName, ch.next.ClaimExpiresAt = nil, nil, nil
		if in.Args.Reason != "" {
			ch.detail["reason"] = in.Args.Reason
		}
		return ch, nil, nil
	case OpAssign:
		return assign(ctx, tx, ch, cur, in)
	case OpStatus:
		return setStatus(ch, cur, now, in)
	case OpNote:
		return note(ctx, tx, ch, cur, actor, in)
	case OpNoteEdit:
		return noteEdit(ctx, tx, ch, cur, e.now(), actor, in)
	case OpReplay:
		return replay(ctx, tx, ch, cur, actor, in)
	}
	return ch, reject(cur, RejectInvalid, fmt.Sprintf("Unknown operation %q.", in.Op)), nil
}

// claim takes (or renews) the claim for one lease. Taking over someone
// else's live claim needs a reason, which the history shows.
func (e *Engine) claim(ch change, cur Item, now time.Time, actor auth.Principal, in Input) (change, *Answer, error) {
	expires := now.Add(e.lease())
	if cur.ClaimedAt(now) && *cur.ClaimHolderID != actor.UserID {
		if in.Args.Reason == "" {
			return ch, reject(cur, RejectInvalid, "Taking over "+cur.ClaimHolder+"'s claim needs a reason."), nil
		}
		ch.event = "claim.takeover"
		ch.detail["from"] = cur.ClaimHolder
		ch.detail["reason"] = in.Args.Reason
	}
	id, name := actor.UserID, actor.Name
	ch.next.ClaimHolderID, ch.next.ClaimHolderName, ch.next.ClaimExpiresAt = &id, &name, &expires
	ch.detail["expires_at"] = expires
	return ch, nil, nil
}

func assign(ctx context.Context, tx pgx.Tx, ch change, cur Item, in Input) (change, *Answer, error) {
	if in.Args.Assignee == cur.Assignee {
		return ch, reject(cur, RejectInvalid, "The item already has that assignee."), nil
	}
	ch.detail["from"], ch.detail["to"] = cur.Assignee, in.Args.Assignee
	if in.Args.Assignee == "" {
		ch.next.AssigneeID, ch.next.AssigneeName = nil, nil
		return ch, nil, nil
	}
	u, err := queries.New(tx).UserGetByName(ctx, in.Args.Assignee)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u.DisabledAt != nil) {
		return ch, reject(cur, RejectInvalid, "No enabled account is called "+in.Args.Assignee+"."), nil
	}
	if err != nil {
		return ch, nil, fmt.Errorf("find the assignee: %w", err)
	}
	ch.next.AssigneeID, ch.next.AssigneeName = &u.ID, &u.Name
	return ch, nil, nil
}

// setStatus moves the item along its lifecycle. Settling it (resolved,
// ignored) also ends the claim: nobody works on a settled item.
func setStatus(ch change, cur Item, now time.Time, in Input) (change, *Answer, error) {
	to := in.Args.Status
	if !slices.Contains(transitions[cur.Status], to) {
		return ch, reject(cur, RejectTransition, fmt.Sprintf("An item cannot go from %s to %q.", cur.Status, to)), nil
	}
	if in.Args.Until != nil && (to != Ignored || !in.Args.Until.After(now)) {
		return ch, reject(cur, RejectInvalid, "Only an ignore carries an \"until\", and it must lie ahead."), nil
	}
	ch.next.Status, ch.next.IgnoredUntil = string(to), in.Args.Until
	ch.detail["from"], ch.detail["to"] = cur.Status, to
	if in.Args.Until != nil {
		ch.detail["until"] = in.Args.Until
	}
	if in.Args.Reason != "" {
		ch.detail["reason"] = in.Args.Reason
	}
	if to.Settled() {
		ch.next.ClaimHolderID, ch.next.ClaimHolderName, ch.next.ClaimExpiresAt = nil, nil, nil
	}
	return ch, nil, nil
}

func note(ctx context.Context, tx pgx.Tx, ch change, cur Item, actor auth.Principal, in Input) (change, *Answer, error) {
	n, err := queries.New(tx).TriageNoteInsert(ctx, queries.TriageNoteInsertParams{
		ItemID: cur.ID, AuthorID: actor.UserID, AuthorName: actor.Name, Body: in.Args.Body,
	})
	if err != nil {
		return ch, nil, fmt.Errorf("add the note: %w", err)
	}
	ch.detail["note_id"] = n.ID
	return ch, nil, nil
}

// noteEdit replaces a note's text, by its author, within NoteEditWindow
// of writing it; the earlier text stays in its versions.
func noteEdit(ctx context.Context, tx pgx.Tx, ch change, cur Item, clock *time.Time, actor auth.Principal, in Input) (change, *Answer, error) {
	q := queries.New(tx)
	n, err := q.TriageNoteLock(ctx, queries.TriageNoteLockParams{Now: clock, ID: in.Args.NoteID, ItemID: cur.ID})
	if errors.Is(err, pgx.ErrNoRows) {
		return ch, reject(cur, RejectNotFound, "No such note on this item."), nil
	}
	if err != nil {
		return ch, nil, fmt.Errorf("lock the note: %w", err)
	}
	switch {
	case n.AuthorID != actor.UserID || n.AuthorName != actor.Name:
		return ch, reject(cur, RejectNotAuthor, "Only its author may edit a note."), nil
	case n.DbNow.Sub(n.CreatedAt) > NoteEditWindow:
		return ch, reject(cur, RejectEditWindow, "A note can be edited for ten minutes after it was written."), nil
	}
	edited, err := q.TriageNoteEdit(ctx, queries.TriageNoteEditParams{ID: n.ID, Body: in.Args.Body})
	if err != nil {
		return ch, nil, fmt.Errorf("edit the note: %w", err)
	}
	ch.detail["note_id"], ch.detail["edits"] = edited.ID, edited.Edits
	return ch, nil, nil
}

// replay replays the dead messages the item tracks through the outbox's
// replay machinery, in the mutation's transaction: a dead-letter group's
// oldest MaxReplayMessages, or a blocked aggregate's dead head. Each
// message's replay request id derives from the mutation id, so the
// replays are as idempotent as the mutation (invariant 6).
func replay(ctx context.Context, tx pgx.Tx, ch change, cur Item, actor auth.Principal, in Input) (change, *Answer, error) {
	if cur.Status.Settled() {
		return ch, reject(cur, RejectNotReplayable, "Reopen a "+string(cur.Status)+" item before replaying from it."), nil
	}
	mode := outbox.ReplayMode(in.Args.Mode)
	if mode == "" {
		mode = outbox.Redeliver
	}
	// The replay rules are checked before the database: a refusal is an
	// answer, and any error after it is the database's, which has aborted
	// the transaction and must not be stored as an answer.
	if err := outbox.CheckMode(mode, in.Args.Reason); err != nil {
		return ch, reject(cur, RejectInvalid, err.Error()), nil
	}
	ids, err := trackedDead(ctx, queries.New(tx), cur)
	if err != nil || len(ids) == 0 {
		return ch, reject(cur, RejectNotReplayable, "This item has no dead messages to replay."), err
	}
	msgs := make([]outbox.MessageRequest, len(ids))
	for i, id := range ids {
		msgs[i] = outbox.MessageRequest{MessageID: id, RequestID: uuid.NewSHA1(in.MutationID, binary.BigEndian.AppendUint64(nil, uint64(id)))}
	}
	outcomes, err := outbox.ReplayBatch(ctx, tx, outbox.BatchRequest{Messages: msgs, Mode: mode, Actor: actor.Name, Reason: in.Args.Reason})
	if err != nil {
		return ch, nil, fmt.Errorf("replay the item's dead messages: %w", err)
	}
	replayed := 0
	for _, o := range outcomes {
		if o.Err == nil {
			replayed++
		}
	}
	ch.detail["mode"], ch.detail["messages"], ch.detail["replayed"] = mode, len(ids), replayed
	ch.replayed = replayed > 0
	return ch, nil, nil
}

// trackedDead lists the dead messages an item tracks; none for kinds
// without outbox messages.
func trackedDead(ctx context.Context, q *queries.Queries, cur Item) ([]int64, error) {
	switch cur.Kind {
	case DeadLetterGroup:
		var ref struct {
			Fingerprint string `json:"fingerprint"`
		}
		if err := json.Unmarshal(cur.Ref, &ref); err != nil {
			return nil, fmt.Errorf("read the item's ref: %w", err)
		}
		return q.TriageDeadGroupMessageList(ctx, queries.TriageDeadGroupMessageListParams{Fingerprint: ref.Fingerprint, MaxMessages: MaxReplayMessages})
	case BlockedAggregate:
		var ref struct {
			Destination   string `json:"destination"`
			AggregateType string `json:"aggregate_type"`
			AggregateID   string `json:"aggregate_id"`
		}
		if err := json.Unmarshal(cur.Ref, &ref); err != nil {
			return nil, fmt.Errorf("read the item's ref: %w", err)
		}
		head, err := q.TriageBlockedHeadGet(ctx, queries.TriageBlockedHeadGetParams(ref))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		return []int64{head}, err
	}
	return nil, nil
}
