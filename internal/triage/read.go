package triage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
)

// Get reads one item.
func Get(ctx context.Context, db queries.DBTX, id int64) (Item, error) {
	row, err := queries.New(db).TriageItemGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("triage: get item %d: %w", id, err)
	}
	return itemOf(row), nil
}

// Find reads the item that tracks (kind, ref); ErrNotFound if none does.
// ref is compared as jsonb, so key order and spacing do not matter.
func Find(ctx context.Context, db queries.DBTX, kind Kind, ref json.RawMessage) (Item, error) {
	row, err := queries.New(db).TriageItemGetByRef(ctx, queries.TriageItemGetByRefParams{Kind: string(kind), Ref: ref})
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("triage: find %s %s: %w", kind, ref, err)
	}
	return itemOf(row), nil
}

// FindMany reads the items of kind that track any of refs (JSON
// objects); refs without an item have none in the result.
func FindMany(ctx context.Context, db queries.DBTX, kind Kind, refs [][]byte) ([]Item, error) {
	rows, err := queries.New(db).TriageItemListByRefs(ctx, queries.TriageItemListByRefsParams{Kind: string(kind), Refs: refs})
	if err != nil {
		return nil, fmt.Errorf("triage: find %s items: %w", kind, err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = itemOf(r)
	}
	return items, nil
}

// GetMany reads the items of ids that exist, in id order (a page's
// resync after a reconnect).
func GetMany(ctx context.Context, db queries.DBTX, ids []int64) ([]Item, error) {
	rows, err := queries.New(db).TriageItemListByIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("triage: get items: %w", err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = itemOf(r)
	}
	return items, nil
}

// Filter selects the board's items. The zero Filter is every item.
type Filter struct {
	Statuses []Status
	Kind     Kind
	// AssigneeID: only this account's items; Unassigned: only items
	// without an assignee.
	AssigneeID *int64
	Unassigned bool
	// After is the keyset cursor: the last item of the previous page.
	After *Item
	Limit int32
}

// List returns the board's items under f, most recently changed first.
func List(ctx context.Context, db queries.DBTX, f Filter) ([]Item, error) {
	p := queries.TriageItemListParams{
		Statuses: make([]string, len(f.Statuses)), Kind: string(f.Kind), Unassigned: f.Unassigned,
		AssigneeID: f.AssigneeID, PageSize: f.Limit,
	}
	for i, s := range f.Statuses {
		p.Statuses[i] = string(s)
	}
	if f.After != nil {
		p.AfterUpdated, p.AfterID = &f.After.UpdatedAt, &f.After.ID
	}
	if p.PageSize <= 0 {
		p.PageSize = 100
	}
	rows, err := queries.New(db).TriageItemList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("triage: list items: %w", err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = itemOf(r)
	}
	return items, nil
}

// Counts returns how many items have each status.
func Counts(ctx context.Context, db queries.DBTX) (map[Status]int64, error) {
	rows, err := queries.New(db).TriageItemCountByStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("triage: count items: %w", err)
	}
	counts := make(map[Status]int64, len(rows))
	for _, r := range rows {
		counts[Status(r.Status)] = r.Items
	}
	return counts, nil
}

// Event is one entry of an item's history.
type Event struct {
	Version int64           `json:"version"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Op      string          `json:"op"`
	Detail  json.RawMessage `json:"detail"`
}

// History returns an item's whole history from the event log, oldest
// first.
func History(ctx context.Context, db queries.DBTX, id int64) ([]Event, error) {
	rows, err := queries.New(db).TriageEventList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("triage: history of item %d: %w", id, err)
	}
	events := make([]Event, len(rows))
	for i, r := range rows {
		events[i] = Event{Version: r.Version, At: r.At, Actor: r.Actor, Op: r.Op, Detail: r.Detail}
	}
	return events, nil
}

// Note is a note on an item, in its current version.
type Note struct {
	ID        int64      `json:"id"`
	Author    string     `json:"author"`
	AuthorID  int64      `json:"author_id"`
	Body      string     `json:"body"`
	Edits     int32      `json:"edits"`
	CreatedAt time.Time  `json:"created_at"`
	EditedAt  *time.Time `json:"edited_at,omitempty"`
}

// Notes returns an item's notes, oldest first.
func Notes(ctx context.Context, db queries.DBTX, id int64) ([]Note, error) {
	rows, err := queries.New(db).TriageNoteList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("triage: notes of item %d: %w", id, err)
	}
	notes := make([]Note, len(rows))
	for i, r := range rows {
		notes[i] = Note{ID: r.ID, Author: r.AuthorName, AuthorID: r.AuthorID, Body: r.Body, Edits: r.Edits, CreatedAt: r.CreatedAt, EditedAt: r.EditedAt}
	}
	return notes, nil
}

// Heartbeat extends actor's live claim of an item by one lease while their
// page is open, and returns its new expiry. ErrClaimLost: the claim is not
// theirs (it expired and was taken, or was released), or the actor's role
// no longer allows claiming (an account demoted while it held one: its
// open page must not keep the claim alive). A heartbeat is no event: the
// log says who claimed, not that a page stayed open.
func (e *Engine) Heartbeat(ctx context.Context, actor auth.Principal, id int64) (time.Time, error) {
	if !actor.Role.Allows(auth.Operator) {
		return time.Time{}, ErrClaimLost
	}
	holder := actor.UserID
	expires, err := queries.New(e.Pool).TriageItemHeartbeat(ctx, queries.TriageItemHeartbeatParams{
		Now: e.now(), LeaseSeconds: e.lease().Seconds(), ID: id, HolderID: &holder,
	})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && expires == nil) {
		return time.Time{}, ErrClaimLost
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("triage: heartbeat item %d: %w", id, err)
	}
	return *expires, nil
}

// Track records in tx that the failure (kind, ref) happened: it creates
// its item, or reopens it if settled, and announces that on the change
// feed. The triggers do this for dead letters, parked inbox events and
// blocked aggregates; a writer without one (the reconciler) calls Track.
// ref is a JSON object naming the failure group; why goes into the
// history.
func Track(ctx context.Context, tx pgx.Tx, kind Kind, ref json.RawMessage, title, why string) error {
	err := queries.New(tx).TriageTrack(ctx, queries.TriageTrackParams{Kind: string(kind), Ref: ref, Title: title, Why: why})
	if err != nil {
		return fmt.Errorf("triage: track %s %s: %w", kind, ref, err)
	}
	return nil
}

// ReopenPending reopens the items that a mutation settled while a failure
// of theirs came (migrations/00018_triage_reopen_race.sql): the failure's
// transaction cannot wait for the mutation, so it records itself, and
// this waits for the mutation to commit. It handles up to
// MaxReopenPending recorded failures and returns how many items it
// reopened. The engine calls it after each settle; every console
// instance calls it on its presence sweep, for failures whose commit came
// after that.
func ReopenPending(ctx context.Context, db queries.DBTX) (int32, error) {
	n, err := queries.New(db).TriageReopenPendingApply(ctx, MaxReopenPending)
	if err != nil {
		return 0, fmt.Errorf("triage: reopen the items failures came to while settled: %w", err)
	}
	return n, nil
}

// MaxReopenPending bounds one ReopenPending.
const MaxReopenPending = 100

// PruneMutations forgets stored mutation answers older than keep: a
// client resends a mutation within seconds of a reconnect, not days.
func PruneMutations(ctx context.Context, db queries.DBTX, keep time.Duration) (int64, error) {
	n, err := queries.New(db).TriageMutationPrune(ctx, keep.Seconds())
	if err != nil {
		return 0, fmt.Errorf("triage: prune mutation answers: %w", err)
	}
	return n, nil
}
