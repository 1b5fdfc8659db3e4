// Package changefeed is the change feed behind the console's live views.
//
// Writers call Append inside the transaction that makes a state change a
// live view must show (a message went dead, a breaker changed state, an
// inbox event failed), and Notify after it committed. Notify is a wake-up
// only: it carries no data, and a lost notification loses nothing, because
// the rows are the message. It is never sent inside the writer's
// transaction: on PostgreSQL a NOTIFY serialises every committing
// transaction (ARCHITECTURE.md, invariant 9).
//
// # Positions: delivering around open transactions
//
// Each console instance runs one Listener. It listens on the process's one
// LISTEN connection (internal/pglisten, shared with the dispatcher) and,
// on every (re)connect, every wake-up and every poll tick, reads the table
// after what it has delivered. A change's key is its Cursor (xid, id): the
// writer's transaction id (xid8) and the row's bigserial id. A cursor alone
// cannot say what a reader has seen: ids are taken at INSERT and
// transactions commit in any order, so after a reader has delivered the
// row at (20, 7), the row at (15, 5) of a transaction that was still
// running may commit. Waiting behind pg_snapshot_xmin (the oldest
// transaction running anywhere on the server) is safe but lets any idle
// transaction, of any application in any database, stall every live view
// for as long as it stays open.
//
// So the Listener reads in one REPEATABLE READ snapshot: the transactions
// in progress (pg_snapshot_xip of pg_current_snapshot), the rows after its
// cursor (every row the snapshot returns is committed) and the rows of the
// transactions it remembered as open that have since ended. It delivers
// all of them at once, and remembers as open each transaction that was in
// progress below a row it delivered. What a reader has been delivered is
// therefore a Position: a cursor plus the transactions open below it (and,
// for each, the last of its rows delivered): "every change up to the
// cursor, except the open transactions' later rows". Positions are sets,
// so any instance can tell what another instance's reader lacks
// (Position.Within, Since). The rows of an open transaction are delivered
// when it commits (its writer's NOTIFY, or the next poll); an aborted or
// read-only one is forgotten with nothing to deliver. Positions grow with
// every delivery; MaxOpen bounds how many open transactions one holds
// (beyond it, delivery waits for the oldest: Status.HeldBack).
//
// Delivery order, the same for every subscriber of a Listener: in each
// read, first the rows of ended open transactions in cursor order, then
// the rows after the cursor in cursor order. Every change carries the
// Position after it; that Position is its SSE event id, and a reader that
// stops after any change resumes from its Position (Since) without
// skipping a row that committed late or receiving one twice. Exactly once
// per Listener: subscribers never get the same change twice.
//
// # Retention
//
// Prune deletes settled rows (below pg_snapshot_xmin: no transaction can
// still add rows among them) older than the retention window in cursor
// order and records the highest cursor it deleted. A reader whose position
// is at or above that record, with no open transaction at or below it,
// can be resumed from the table (Since), for any filter of kinds and
// subjects, each read through an index of its own; a reader below it may
// have missed rows that are gone and must resync (ErrCursorExpired).
package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// Kinds of change. A kind names what changed, so that a view can refresh the
// regions that show it; views subscribe by kind. New kinds are added here.
const (
	// KindDeadLetter: messages went dead. Written by the dispatcher's
	// finalize, one row per error fingerprint per finalize (a mass failure
	// is a few rows, not one per message). Subject: the fingerprint.
	// Payload: {"dead": how many, "destinations": [...]}.
	KindDeadLetter = "dead_letter"
	// KindBreaker: a destination's circuit breaker changed state.
	// Subject: the destination. Payload: {"from", "to"}.
	KindBreaker = "breaker"
	// KindInboxFailure: an inbound event failed or was parked. Subject:
	// "source/event id". Payload: {"source", "state"}.
	KindInboxFailure = "inbox_failure"
	// KindInboxEvent: an operator acted on an inbound event (a retry:
	// processed, settled, or failed again), in the action's transaction.
	// Subject: the event's id (switchyard.inbox_events.id), in decimal, so
	// that an event's page asks the stream for its own event only.
	// Payload: {"source", "status"}.
	KindInboxEvent = "inbox_event"
	// KindAudit: an audit row was recorded (internal/audit). Subject: its
	// id. Payload: {} (streams reach viewers; the trail is for admins).
	KindAudit = "audit"
	// KindSessionRevoked: console sessions ended before their time
	// (logout, password change, disable, admin revoke); every console
	// instance closes their open streams. Subject: "sessions" (no account
	// name: streams reach every viewer). Payload: {"sessions": [ids]}.
	KindSessionRevoked = "session_revoked"
	// KindMessageChanged: an operator action changed a message as its
	// pages show it (replayed, discarded, restored), or created it (a
	// replay). One row per message, in the action's transaction; every
	// open page of that message re-fetches its live regions. Subject: the
	// message id, in decimal, so that a page asks the stream for its own
	// message only. Payload: {"action": the audit action}. Also written by
	// the dispatcher's finalize when a replay settles (delivered or dead),
	// for the replay and its original, payload {"action":
	// "message.delivered"|"message.dead"}: replays are rare, so ordinary
	// messages' finalizes still write no feed row. Not announced: the
	// messages a bulk replay job creates (its progress is, as
	// "replay_job" rows).
	KindMessageChanged = "message_changed"
	// KindStats: the statistics leader stored a new snapshot
	// (internal/stats; written by the StatsSnapshotSave query). Subject:
	// "". Payload: {"version", "newest_outbox_id", "newest_delivery_us"}.
	KindStats = "stats"
	// KindReplayJob: a bulk replay job advanced, finished or was cancelled
	// (internal/bulkreplay; written by the ReplayJob queries). Subject: the
	// job id. Payload: {"state", "replayed", "skipped", "estimate"}, or,
	// when some of its replays settled (the dispatcher's finalize),
	// {"settled": n}.
	KindReplayJob = "replay_job"
	// KindReconcileProgress: a reconciliation cycle started, advanced or
	// ended (internal/reconcile). At most about one a second per running
	// cycle, plus one when it ends. Subject: the check's name. Payload:
	// {"cycle": id, "state"}.
	KindReconcileProgress = "reconcile_progress"
	// KindReconcileFinding: reconciliation findings opened, reopened,
	// resolved, or an operator acted on one. One row per batch or action,
	// not per finding. Subject: the check's name. Payload: {"opened",
	// "resolved"} counts, or {"finding": id, "action"} for an action.
	KindReconcileFinding = "reconcile_finding"

	// KindTriage: a triage item was created, reopened or changed by a
	// mutation (internal/triage), in the transaction that changed it.
	// Subject: the item id, in decimal. Payload: {"version", "status"};
	// a view with an older version re-reads the item.
	KindTriage = "triage"
	// KindPresence: who looks at a triage view changed (someone opened
	// or left it, or their presence expired). Subject: the view, "board"
	// or "item:<id>". Payload: {}; a view re-reads who is there.
	KindPresence = "presence"
	// KindConfig: an admin created or changed a destination or an inbox
	// source on the configuration pages (internal/action), or sent it a
	// test event. Subject: "destination/<name>" or "source/<name>".
	// Payload: {"action": the audit action}. Open configuration pages
	// re-read their lists.
	KindConfig = "config"
)

// Kinds lists every kind of change, for checks and for pages that must
// know them all. A kind written anywhere (Go or SQL) is one of these; a
// test holds the SQL to it.
var Kinds = []string{
	KindDeadLetter, KindBreaker, KindInboxFailure, KindInboxEvent, KindAudit,
	KindSessionRevoked, KindMessageChanged, KindStats, KindReplayJob,
	KindReconcileProgress, KindReconcileFinding, KindTriage, KindPresence,
	KindConfig,
}

// MaxPayloadBytes bounds a change's payload: the feed says what changed,
// never carries the data itself (the migration enforces a looser bound).
const MaxPayloadBytes = 2048

// kindPattern keeps kinds safe as SSE event names and URL parameters.
var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,63}$`)

// ErrInvalid wraps every validation failure of Append; nothing is written.
var ErrInvalid = errors.New("changefeed: invalid change")

// ErrCursorExpired means rows after the cursor may have been pruned: the
// reader cannot resume from it and must resync.
var ErrCursorExpired = errors.New("changefeed: cursor older than retention")

// Cursor is a position in the feed: (transaction id, row id), ordered by
// XID then ID. The zero Cursor is before every change.
type Cursor struct {
	XID uint64
	ID  int64
}

// Compare returns -1, 0 or +1 as c is before, equal to or after o.
func (c Cursor) Compare(o Cursor) int {
	switch {
	case c.XID != o.XID:
		if c.XID < o.XID {
			return -1
		}
		return 1
	case c.ID < o.ID:
		return -1
	case c.ID > o.ID:
		return 1
	}
	return 0
}

// String encodes c as "xid-id", the form used as an SSE event id.
func (c Cursor) String() string {
	return strconv.FormatUint(c.XID, 10) + "-" + strconv.FormatInt(c.ID, 10)
}

// ParseCursor decodes what Cursor.String produced.
func ParseCursor(s string) (Cursor, error) {
	x, i, ok := strings.Cut(s, "-")
	xid, err1 := strconv.ParseUint(x, 10, 64)
	id, err2 := strconv.ParseInt(i, 10, 64)
	if !ok || err1 != nil || err2 != nil || id < 0 {
		return Cursor{}, fmt.Errorf("changefeed: invalid cursor %q", s)
	}
	return Cursor{XID: xid, ID: id}, nil
}

// Change is one row of the feed.
type Change struct {
	// Cursor is the change's key, set on changes read from the feed;
	// Append ignores it.
	Cursor Cursor
	// Position is what a reader has been delivered once it has this
	// change: the change's resumable cursor (SSE event id). Set on
	// changes a Listener delivers or Since returns.
	Position Position
	// Kind is one of the Kind constants: 1 to 64 of a-z, 0-9, '_' and
	// '.', starting with a letter.
	Kind string
	// Subject names the thing that changed (a message id, a destination);
	// at most 512 bytes.
	Subject string
	// Payload is a small JSON object (at most MaxPayloadBytes); nil: {}.
	Payload json.RawMessage
	// CreatedAt is the writer's transaction time; set when read.
	CreatedAt time.Time
}

// Append records c in tx, the writer's transaction: the change commits if
// and only if the writer's own change does. It sends no NOTIFY: call Notify
// after the commit. On a validation error nothing is written and tx stays
// usable.
func Append(ctx context.Context, tx pgx.Tx, c Change) error {
	if err := validate(c); err != nil {
		return err
	}
	payload := []byte(c.Payload)
	if payload == nil {
		payload = []byte("{}")
	}
	err := queries.New(tx).ChangeAppend(ctx, queries.ChangeAppendParams{Kind: c.Kind, Subject: c.Subject, Payload: payload})
	if err != nil {
		return fmt.Errorf("changefeed: append %s: %w", c.Kind, err)
	}
	return nil
}

func validate(c Change) error {
	switch {
	case !kindPattern.MatchString(c.Kind):
		return fmt.Errorf("%w: kind %q: want 1 to 64 of a-z, 0-9, '_' and '.', starting with a letter", ErrInvalid, c.Kind)
	case len(c.Subject) > 512:
		return fmt.Errorf("%w: subject longer than 512 bytes", ErrInvalid)
	case len(c.Payload) > MaxPayloadBytes:
		return fmt.Errorf("%w: payload of %d bytes, limit %d", ErrInvalid, len(c.Payload), MaxPayloadBytes)
	case c.Payload != nil && !json.Valid(c.Payload):
		return fmt.Errorf("%w: payload is not valid JSON", ErrInvalid)
	}
	return nil
}

// channel is the LISTEN/NOTIFY channel of the feed (spelled out in the
// ChangeListen query, and ChangeNotify's argument).
const channel = "switchyard_changes"

// Notify wakes every Listener, on every console instance. Call it after
// the transaction that appended has committed, never inside it. It is an
// optimisation only (Listeners poll too), so a caller may log its error and
// go on. Wake-ups coalesce: PostgreSQL folds identical notifications of one
// transaction, and a Listener folds any number of wake-ups that arrive
// while it reads into one more read.
func Notify(ctx context.Context, pool *pgxpool.Pool) error {
	if err := queries.New(pool).ChangeNotify(ctx, channel); err != nil {
		return fmt.Errorf("changefeed: notify: %w", err)
	}
	return nil
}

func toCursor(xid pgtype.Uint64, id int64) Cursor {
	return Cursor{XID: xid.Uint64, ID: id}
}

func xid8(c Cursor) pgtype.Uint64 {
	return pgtype.Uint64{Uint64: c.XID, Valid: true}
}
