package triage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/queries"
)

// change is what an op decided: the item's next state, the event that
// records it, and whether it wrote outbox rows.
type change struct {
	next     queries.TriageItemWriteParams
	event    string         // the event's op: "claim", "claim.takeover", ...
	detail   map[string]any // the event's (and the audit row's) detail
	replayed bool
}

// decide runs after the dedupe: role check → lock the item →
// precondition → the op → event, read model, change feed, audit row.
func (e *Engine) decide(ctx context.Context, tx pgx.Tx, actor auth.Principal, in Input) (Answer, outcome, error) {
	q := queries.New(tx)
	if !actor.Role.Allows(auth.Operator) {
		return e.deny(ctx, tx, actor, in)
	}
	row, err := q.TriageItemLock(ctx, queries.TriageItemLockParams{Now: e.now(), ID: in.ItemID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Answer{Reason: RejectNotFound, Message: "No such triage item."}, outcome{}, nil
	}
	if err != nil {
		return Answer{}, outcome{}, fmt.Errorf("lock the item: %w", err)
	}
	if e.afterLock != nil {
		e.afterLock()
	}
	cur, now := itemOf(row.SwitchyardTriageItem), row.DbNow
	if a := precondition(cur, now, actor, in); a != nil {
		return *a, outcome{}, nil
	}
	ch, rej, err := e.apply(ctx, tx, cur, now, actor, in)
	if err != nil || rej != nil {
		return derefOr(rej), outcome{}, err
	}
	it, err := record(ctx, tx, actor, in, ch)
	if err != nil {
		return Answer{}, outcome{}, err
	}
	detail, _ := json.Marshal(ch.detail)
	return Answer{OK: true, Item: &it, Detail: detail}, outcome{changed: true, replayed: ch.replayed, settled: in.Op == OpStatus && it.Status.Settled()}, nil
}

func derefOr(a *Answer) Answer {
	if a == nil {
		return Answer{}
	}
	return *a
}

// deny refuses a mutation for the actor's role and records that in the
// audit trail (outcome denied), in the transaction that stores the
// answer: a repeated attempt is neither applied nor audited twice.
func (e *Engine) deny(ctx context.Context, tx pgx.Tx, actor auth.Principal, in Input) (Answer, outcome, error) {
	a := Answer{Reason: RejectForbidden, Message: "Your role (" + actor.Role.String() + ") may look, not change: triage needs the operator role."}
	row, err := queries.New(tx).TriageItemGet(ctx, in.ItemID)
	switch {
	case err == nil:
		it := itemOf(row)
		a.Item = &it
	case !errors.Is(err, pgx.ErrNoRows):
		return Answer{}, outcome{}, fmt.Errorf("read the item: %w", err)
	}
	if actor.SessionID != 0 {
		// A viewer's socket may send many mutations a second, each with a
		// new id: like refused routes (auth.Service.RecordDenied), a
		// session's refusals reach the append-only trail once a
		// minute and are counted on the session in between.
		count, err := queries.New(tx).SessionDenialCount(ctx, queries.SessionDenialCountParams{
			ID: actor.SessionID, IntervalSeconds: deniedAuditInterval.Seconds(),
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return a, outcome{}, nil // the session is gone: nothing to record it against
		case err != nil:
			return Answer{}, outcome{}, fmt.Errorf("count the refusal: %w", err)
		case !count.Due:
			return a, outcome{}, nil
		}
	}
	_, err = audit.Record(ctx, tx, audit.Entry{
		Actor: actor.Name, ActorID: actor.ActorID(), Action: "triage." + string(in.Op), Target: target(in.ItemID),
		Outcome: audit.Denied, RequestID: in.MutationID.String(), RemoteAddr: in.RemoteAddr,
	})
	return a, outcome{}, err
}

// deniedAuditInterval is how often a session's refused mutations are
// recorded: the default of auth.Config.DeniedAuditInterval, so that a
// refused route and a refused mutation are bounded alike.
const deniedAuditInterval = time.Minute

// precondition refuses a mutation the item's state does not allow: a live
// claim of someone else (notes and a takeover aside), then a version the
// client saw that is no longer the item's.
func precondition(cur Item, now time.Time, actor auth.Principal, in Input) *Answer {
	othersClaim := cur.ClaimedAt(now) && *cur.ClaimHolderID != actor.UserID
	if othersClaim && in.Op != OpNote && in.Op != OpNoteEdit && !(in.Op == OpClaim && in.Args.Takeover) {
		a := reject(cur, RejectClaimed, cur.ClaimHolder+" is working on this item; take it over with a reason to act on it.")
		a.Holder = cur.ClaimHolder
		return a
	}
	if versioned[in.Op] && in.SeenVersion != cur.Version {
		return reject(cur, RejectStale, fmt.Sprintf("The item changed (version %d, you saw %d): look again.", cur.Version, in.SeenVersion))
	}
	return nil
}

func reject(cur Item, r Reason, msg string) *Answer {
	return &Answer{Reason: r, Message: msg, Item: &cur}
}

// record writes the change: the read model, the event of its new
// version, the change-feed row and the audit row, all in tx.
func record(ctx context.Context, tx pgx.Tx, actor auth.Principal, in Input, ch change) (Item, error) {
	q := queries.New(tx)
	row, err := q.TriageItemWrite(ctx, ch.next)
	if err != nil {
		return Item{}, fmt.Errorf("write the item: %w", err)
	}
	it := itemOf(row)
	detail, err := json.Marshal(ch.detail)
	if err != nil {
		return Item{}, fmt.Errorf("encode the event: %w", err)
	}
	err = q.TriageEventAppend(ctx, queries.TriageEventAppendParams{
		ItemID: it.ID, Version: it.Version, Actor: actor.Name, ActorID: actor.ActorID(), Op: ch.event,
		MutationID: pgtype.UUID{Bytes: in.MutationID, Valid: true}, Detail: detail,
	})
	if err != nil {
		return Item{}, fmt.Errorf("append the event: %w", err)
	}
	if err := announce(ctx, tx, it); err != nil {
		return Item{}, err
	}
	_, err = audit.Record(ctx, tx, audit.Entry{
		Actor: actor.Name, ActorID: actor.ActorID(), Action: "triage." + ch.event, Target: target(it.ID),
		Reason: in.Args.Reason, Outcome: audit.OK, RequestID: in.MutationID.String(), RemoteAddr: in.RemoteAddr, Detail: detail,
	})
	return it, err
}

// announce appends the item's changefeed.KindTriage row: every console
// instance pushes the new state to its own clients.
func announce(ctx context.Context, tx pgx.Tx, it Item) error {
	payload, _ := json.Marshal(map[string]any{"version": it.Version, "status": it.Status})
	err := changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindTriage, Subject: strconv.FormatInt(it.ID, 10), Payload: payload})
	if err != nil {
		return fmt.Errorf("announce item %d: %w", it.ID, err)
	}
	return nil
}

func target(id int64) string { return "triage:" + strconv.FormatInt(id, 10) }

// base is the write of cur as it is, an expired claim cleared: the start
// of every op's next state.
func base(cur Item, now time.Time) queries.TriageItemWriteParams {
	p := queries.TriageItemWriteParams{
		ID: cur.ID, Status: string(cur.Status), IgnoredUntil: cur.IgnoredUntil, AssigneeID: cur.AssigneeID,
	}
	if cur.Assignee != "" {
		p.AssigneeName = &cur.Assignee
	}
	if cur.ClaimedAt(now) {
		p.ClaimHolderID, p.ClaimHolderName, p.ClaimExpiresAt = cur.ClaimHolderID, &cur.ClaimHolder, cur.ClaimExpiresAt
	}
	return p
}
