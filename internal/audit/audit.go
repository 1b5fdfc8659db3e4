// Package audit is the console's append-only audit trail: who did what,
// when, to what, why, and with what outcome.
//
// Every operator action calls Record inside the transaction that makes its
// effect, so the row exists if and only if the effect does (invariant 7).
// The table refuses UPDATE, DELETE and TRUNCATE in the database itself, and
// its rows are hash-chained (each hash covers the row and the previous
// hash), so Verify detects an edit made by someone who bypassed the
// trigger and did not recompute the chain. Against one who did, or who
// deleted rows from the end, the trail is anchored outside the database
// (seal.go): a Sealer seals rows under a key the database never holds and
// writes checkpoints of the head to a file, and Check verifies against
// both. Record also appends a KindAudit change to the change feed, so
// the Audit page updates live; the caller sends changefeed.Notify (or a
// Notifier's Poke) after its commit, as for any change.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/queries"
)

// Outcome is how an action ended.
type Outcome string

// The outcomes.
const (
	OK     Outcome = "ok"     // it took effect
	Denied Outcome = "denied" // refused: a role, a precondition
	Failed Outcome = "failed" // attempted and failed (a wrong password)
)

// Actions recorded by the accounts code. Operator actions add their own
// (replay, replay.bulk, message.edit, message.discard, aggregate.unblock).
const (
	ActionLogin          = "login"
	ActionLogout         = "logout"
	ActionPasswordChange = "password.change"
	ActionUserAdd        = "user.add"
	ActionUserDisable    = "user.disable"
	ActionSessionRevoke  = "session.revoke"
	// ActionAccessDenied: a signed-in account was refused a request for
	// its role (outcome Denied; see auth.Service.RecordDenied).
	ActionAccessDenied = "access.denied"
)

// Entry is one audit row to record.
type Entry struct {
	// Actor is the account name ("cli" for the command line, "demo" in
	// demo mode); ActorID its id when it is an account.
	Actor   string
	ActorID *int64
	// Action: 1 to 64 of a-z, 0-9, '_' and '.', starting with a letter.
	Action string
	// Target names what was acted on (a message id, an account name).
	Target string
	// Reason is the operator's stated reason, if any.
	Reason  string
	Outcome Outcome
	// RequestID is the client-generated request id (the idempotency key).
	RequestID  string
	RemoteAddr string
	// Detail is any further JSON object (a filter, a before/after); nil:
	// {}.
	Detail json.RawMessage
}

var actionPattern = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,63}$`)

// ErrInvalid wraps a validation failure of Record; nothing is written.
var ErrInvalid = errors.New("audit: invalid entry")

// Record appends e in tx, the transaction of the effect it records, and
// returns the row's id. It also appends a changefeed.KindAudit change in
// tx: notify after the commit.
func Record(ctx context.Context, tx pgx.Tx, e Entry) (int64, error) {
	if err := validate(e); err != nil {
		return 0, err
	}
	detail := []byte(e.Detail)
	if detail == nil {
		detail = []byte("{}")
	}
	row, err := queries.New(tx).AuditInsert(ctx, queries.AuditInsertParams{
		Actor: e.Actor, ActorID: e.ActorID, Action: e.Action, Target: e.Target, Reason: e.Reason,
		Outcome: string(e.Outcome), RequestID: e.RequestID, RemoteAddr: e.RemoteAddr, Detail: detail,
	})
	if err != nil {
		return 0, fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	// The change names only the row: every viewer's stream carries it,
	// and the trail itself is for admins.
	if err := changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindAudit, Subject: strconv.FormatInt(row.ID, 10)}); err != nil {
		return 0, fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	return row.ID, nil
}

func validate(e Entry) error {
	switch {
	case e.Actor == "":
		return fmt.Errorf("%w: no actor", ErrInvalid)
	case !actionPattern.MatchString(e.Action):
		return fmt.Errorf("%w: action %q", ErrInvalid, e.Action)
	case e.Outcome != OK && e.Outcome != Denied && e.Outcome != Failed:
		return fmt.Errorf("%w: outcome %q", ErrInvalid, e.Outcome)
	case e.Detail != nil && !json.Valid(e.Detail):
		return fmt.Errorf("%w: detail is not valid JSON", ErrInvalid)
	}
	return nil
}

// Row is one recorded entry, as read back.
type Row struct {
	ID         int64
	At         time.Time
	Actor      string
	Action     string
	Target     string
	Reason     string
	Outcome    Outcome
	RequestID  string
	RemoteAddr string
	Detail     json.RawMessage
}

// Filter selects a page of the trail, newest first.
type Filter struct {
	Actor  string // "": any
	Action string // "": any
	Before int64  // keyset cursor: rows with a smaller id; 0: the newest
	Limit  int    // 1..500; 0: 50
}

// List returns one page of rows matching f, newest first, and the cursor
// of the next (older) page: 0 when there is none.
func List(ctx context.Context, db queries.DBTX, f Filter) ([]Row, int64, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	rows, err := queries.New(db).AuditList(ctx, queries.AuditListParams{
		BeforeID: f.Before, Actor: f.Actor, Action: f.Action, MaxRows: int32(f.Limit + 1),
	})
	if err != nil {
		return nil, 0, fmt.Errorf("audit: list: %w", err)
	}
	var next int64
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		next = rows[len(rows)-1].ID
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{ID: r.ID, At: r.At, Actor: r.Actor, Action: r.Action, Target: r.Target, Reason: r.Reason,
			Outcome: Outcome(r.Outcome), RequestID: r.RequestID, RemoteAddr: r.RemoteAddr, Detail: r.Detail}
	}
	return out, next, nil
}

// ErrChainBroken means a row's hash or link does not match its content:
// the trail was changed outside the application.
var ErrChainBroken = errors.New("audit: hash chain broken")

// Verify recomputes the whole chain and returns how many rows it checked.
// A mismatch returns ErrChainBroken naming the first bad row.
func Verify(ctx context.Context, db queries.DBTX) (int64, error) {
	r, err := queries.New(db).AuditVerify(ctx)
	if err != nil {
		return 0, fmt.Errorf("audit: verify: %w", err)
	}
	if r.FirstBadID != 0 {
		return r.Checked, fmt.Errorf("%w at row %d", ErrChainBroken, r.FirstBadID)
	}
	return r.Checked, nil
}

// Log reads the trail through DB (a pool).
type Log struct{ DB queries.DBTX }

// List is the package's List on l.DB.
func (l Log) List(ctx context.Context, f Filter) ([]Row, int64, error) { return List(ctx, l.DB, f) }

// Actions returns every action recorded in the trail, sorted: one index
// probe per distinct action (the list is short), never a scan of the rows.
func (l Log) Actions(ctx context.Context) ([]string, error) {
	actions, err := queries.New(l.DB).AuditListActions(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: list recorded actions: %w", err)
	}
	return actions, nil
}
