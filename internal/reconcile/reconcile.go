// Package reconcile finds where our data and an external system disagree.
//
// A check (a row of switchyard.reconcile_checks) pairs a Source, the local
// keys walked in keyset order, with a Remote, the external system asked
// about them in batches. The built-in kinds are "delivery" (the messages
// delivered to a webhook destination, by idempotency key) and "table" (the
// rows of a local table, by key column, with some columns compared); an
// embedding program adds its own through Config.Kinds.
//
// A cycle walks every key the source had when the cycle started: its upper
// bound is fixed then, and its cursor is persisted after every batch, in
// the transaction that records the batch's findings, so a cycle survives
// restarts and kill -9 and every key is examined once. A key that could
// not be checked (the remote was down after its retries) is never counted
// in sync: its range is recorded as unexamined and the cycle ends
// incomplete. Only a complete cycle resolves the findings it no longer saw.
//
// One runner per check across all instances: a runner holds the check's
// lease, and every write it makes names the lease version (a fencing
// token), so a runner whose lease was taken over changes nothing.
//
// Findings are stored once per (check, key, kind), with the lifecycle
// open -> repair_requested -> resolved | ignored; RepairTx enqueues their
// repair through the outbox (repair.go), inside the transaction of the
// operator actions of internal/action (RepairFinding, IgnoreFinding,
// RepairFindings), which check the role and the reason and audit it. The remote contract is in
// docs/reconcile.md.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Classifications of a key. InSync and Unknown are counted, never stored
// as findings; the other three are findings.
const (
	InSync        = "in_sync"
	MissingRemote = "missing_remote"
	MissingLocal  = "missing_local"
	Mismatch      = "mismatch"
	Unknown       = "unknown"
)

// Finding statuses.
const (
	StatusOpen            = "open"
	StatusRepairRequested = "repair_requested"
	StatusResolved        = "resolved"
	StatusIgnored         = "ignored"
)

// Built-in check kinds.
const (
	KindDelivery = "delivery"
	KindTable    = "table"
)

// ErrInvalidCheck wraps every reason a check's row cannot be run.
var ErrInvalidCheck = errors.New("reconcile: invalid check")

// Item is one local key a Source yields.
type Item struct {
	// Cursor is the item's position in the source's keyset order, as text;
	// the cycle persists the last one of each batch.
	Cursor string
	// Key is what the remote is asked about and what a finding names.
	Key string
	// Ref is the local id a repair needs (a delivery check: the message).
	Ref int64
	// Fields, when not nil, are compared with the remote entity's; nil:
	// only presence is checked. A value is a decoded JSON value (numbers
	// as json.Number) or its JSON text as a json.RawMessage (what
	// TableSource gives: equal bytes need no decoding).
	Fields map[string]any
	// RawFields, when Fields is nil, are the compared fields as one JSON
	// object: a remote entity whose RawFields are the same bytes is in
	// sync without decoding either (TableSource writes them as Go's
	// encoding/json would: keys sorted, no spaces).
	RawFields json.RawMessage
}

// Source is the local side of a check. Its keyset order must be total and
// stable: Page(after, upper) returns the items whose cursor is in
// (after, upper], in cursor order. A cycle reads the next page while it
// checks the current one, so Page may run while Exists does.
type Source interface {
	// Bounds is the source's key space at cycle start: the highest cursor
	// (nil: empty) and an estimate of the number of keys. since is the
	// cycle's window start (delivery checks).
	Bounds(ctx context.Context, since time.Time) (upper *string, estimate int64, err error)
	// Page returns at most limit items after after (nil: from the start)
	// up to upper, in cursor order.
	Page(ctx context.Context, since time.Time, after *string, upper string, limit int) ([]Item, error)
}

// Ranged is a Source whose keys are the remote's keys in the same order:
// the remote is also asked for the entities it has in each batch's key
// range, which finds the ones we lack (missing_local). Exists confirms a
// key is absent locally before it is reported (it may have been inserted
// after the cycle started).
type Ranged interface {
	Exists(ctx context.Context, key string) (bool, error)
}

// KeyRange is (After, Through] in the check's key order; nil ends are
// open.
type KeyRange struct {
	After   *string `json:"after,omitempty"`
	Through *string `json:"through,omitempty"`
}

// LookupRequest is one batched question to the remote (docs/reconcile.md).
type LookupRequest struct {
	Keys []string `json:"keys"`
	// Range, when set, asks also for every entity the remote has whose key
	// is in it.
	Range *KeyRange `json:"range,omitempty"`
}

// Entity is what the remote has for one key.
type Entity struct {
	Key     string `json:"key"`
	Version string `json:"version,omitempty"`
	Hash    string `json:"hash,omitempty"`
	// Fields are decoded JSON values or json.RawMessage (HTTPRemote's),
	// as Item.Fields.
	Fields map[string]any `json:"fields,omitempty"`
	// RawFields, when Fields is nil, are the fields as one JSON object,
	// as Item.RawFields (HTTPRemote's: as the remote sent them).
	RawFields json.RawMessage `json:"-"`
}

// Remote is the external side of a check. Lookup returns the entities the
// remote has among req's keys (and in req's range). An error means the
// answer is unknown: the cycle retries, then records the keys as
// unexamined. The cycle applies the check's rate limit and timeout around
// every call, whatever the implementation.
type Remote interface {
	Lookup(ctx context.Context, req LookupRequest) ([]Entity, error)
}
