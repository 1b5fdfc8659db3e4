// Package triage is collaborative triage: items that track a failure that
// wants a person (a dead-letter group, a group of parked inbox events, a
// blocked aggregate, a group of reconciliation findings), with a status,
// an assignee, a claim (who works on it right now) and notes.
//
// # Storage
//
// An append-only event log (switchyard.triage_events) with a read model
// (switchyard.triage_items) updated in the same transaction as each event
// row: the item page shows its whole history from the log, the board reads
// the model. An item's version is the version of its latest event.
//
// Items are created, and resolved items reopened, by triggers on the rows
// they track (migrations/00013_triage.sql), in the transaction that
// creates those rows: the dispatcher's and the inbox's code is untouched
// and only their failure path pays. Track does the same for writers
// without a trigger.
//
// # Mutations
//
// Mutate is transport-free: the WebSocket, the HTTP fallback and tests
// call the same function. Each mutation is ONE transaction: dedupe on
// (account, mutation id) → role check → precondition (version, claim
// holder, allowed transition) → apply → event row → read model →
// change-feed row → audit row → any outbox rows (a replay, through
// outbox.ReplayBatch) → commit → wake-up after the commit. Its answer, ack
// or reject, is stored with the mutation id: the same mutation sent again
// gets the stored answer and changes nothing (ARCHITECTURE.md, invariants
// 6 and 7).
//
// Time comes from the database clock (Engine.Now overrides it in tests):
// a claim is a lease that expires on that clock, whatever the console
// processes' clocks say.
package triage

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// Kind is what an item tracks.
type Kind string

// The kinds of item.
const (
	DeadLetterGroup   Kind = "dead_letter_group"   // ref {"fingerprint"}
	InboxFailureGroup Kind = "inbox_failure_group" // ref {"source", "fingerprint"}
	BlockedAggregate  Kind = "blocked_aggregate"   // ref {"destination", "aggregate_type", "aggregate_id"}
	ReconcileFindings Kind = "reconcile_findings"  // ref named by the reconciler
)

// Status is where an item is in its lifecycle.
type Status string

// The statuses. Resolved and ignored items reopen by themselves when their
// failure happens again (an ignored one only once its "until" has passed).
const (
	Open          Status = "open"
	Acknowledged  Status = "acknowledged"
	Investigating Status = "investigating"
	Resolved      Status = "resolved"
	Ignored       Status = "ignored"
)

// transitions lists the statuses a person may move an item to from each
// status. Any active status may be settled; a settled one only reopened.
var transitions = map[Status][]Status{
	Open:          {Acknowledged, Investigating, Resolved, Ignored},
	Acknowledged:  {Open, Investigating, Resolved, Ignored},
	Investigating: {Open, Acknowledged, Resolved, Ignored},
	Resolved:      {Open},
	Ignored:       {Open},
}

// Settled reports whether s is resolved or ignored.
func (s Status) Settled() bool { return s == Resolved || s == Ignored }

// Item is an item's canonical state, as the read model holds it.
type Item struct {
	ID    int64           `json:"id"`
	Kind  Kind            `json:"kind"`
	Ref   json.RawMessage `json:"ref"`
	Title string          `json:"title"`
	// Status and, for an ignored item, until when.
	Status       Status     `json:"status"`
	IgnoredUntil *time.Time `json:"ignored_until,omitempty"`
	// Assignee is the account name; "" when unassigned.
	Assignee   string `json:"assignee,omitempty"`
	AssigneeID *int64 `json:"assignee_id,omitempty"`
	// ClaimHolder is who claimed it, until ClaimExpiresAt (the database
	// clock); an expired claim is no claim. "" when unclaimed.
	ClaimHolder    string     `json:"claim_holder,omitempty"`
	ClaimHolderID  *int64     `json:"claim_holder_id,omitempty"`
	ClaimExpiresAt *time.Time `json:"claim_expires_at,omitempty"`
	Version        int64      `json:"version"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// ClaimedAt reports whether the item's claim is live at now.
func (it Item) ClaimedAt(now time.Time) bool {
	return it.ClaimExpiresAt != nil && it.ClaimExpiresAt.After(now)
}

func itemOf(r queries.SwitchyardTriageItem) Item {
	it := Item{
		ID: r.ID, Kind: Kind(r.Kind), Ref: json.RawMessage(r.Ref), Title: r.Title, Status: Status(r.Status),
		IgnoredUntil: r.IgnoredUntil, AssigneeID: r.AssigneeID, ClaimHolderID: r.ClaimHolderID,
		ClaimExpiresAt: r.ClaimExpiresAt, Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.AssigneeName != nil {
		it.Assignee = *r.AssigneeName
	}
	if r.ClaimHolderName != nil {
		it.ClaimHolder = *r.ClaimHolderName
	}
	return it
}

// Errors of the package.
var (
	// ErrNotFound: no such item.
	ErrNotFound = errors.New("triage: no such item")
	// ErrClaimLost: a heartbeat of a claim that is not the caller's (any
	// more): it expired and someone else took it, or it was released.
	ErrClaimLost = errors.New("triage: the claim is not yours any more")
)

// NextStatuses returns the statuses a person may move an item from s to.
func NextStatuses(s Status) []string {
	out := make([]string, len(transitions[s]))
	for i, t := range transitions[s] {
		out[i] = string(t)
	}
	return out
}
