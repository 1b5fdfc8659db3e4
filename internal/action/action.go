// Package action holds the operator actions (replay, re-apply, edit and
// replay, discard, restore, bulk replay start and cancel, repair and
// ignore of a reconciliation finding, bulk repair) without any transport: the JSON API, the htmx panels and the collaborative triage
// WebSocket are thin callers of the same functions, so every caller gets
// the same rules, the same role checks and the same audit trail.
//
// The contract of every action:
//
//   - It takes (ctx, pool, actor, input): who acts (Actor, which the caller
//     resolved from its session) and what they asked for, already parsed
//     but not yet trusted.
//   - It checks the actor's role itself (operator for every action; the
//     admin role to edit a payload), and every text field against its
//     documented maximum (limits.go) before the database is touched.
//   - It owns its ONE transaction: the effect, a changefeed row for every
//     message it changed (KindMessageChanged), and its one audit row
//     (audit.Record) commit together or not at all (invariant 7).
//   - After the commit it wakes the change feed and, when it created or
//     freed outbox work, the dispatchers, through the functions in Config:
//     never inside the transaction (invariant 9).
//   - It returns a typed result, or a *Refusal (Kind and a Message safe to
//     show) when the request was refused: a refusal commits nothing and
//     records nothing. A role too low is refused with KindForbidden; the
//     caller records that denial (auth.Service.RecordDenied, which bounds
//     how often per session), since only the transport knows the session
//     and the route. Any other error is a failure (a 500), not a refusal.
//
// Retries: Replay is idempotent by its request id (the same id again
// creates nothing and records nothing: Replayed.Existing). The other
// actions are not: a discard retried finds the message discarded and is
// refused. A transport that retries dedupes its requests itself (the HTTP
// API through the idempotency store, keyed by account and request id).
//
// A caller, in short:
//
//	svc := action.New(action.Config{
//		ChangesCommitted: notifier.Poke,
//		WakeDispatchers:  func(ctx context.Context) error { return outbox.Notify(ctx, pool) },
//		Logger:           logger,
//	})
//	done, err := svc.Replay(ctx, pool, action.ActorOf(principal, remoteAddr), action.ReplayInput{
//		MessageID: id, RequestID: requestID, Mode: outbox.Redeliver,
//	})
//	if r := action.AsRefusal(err); r != nil {
//		// answer r.Kind with r.Message (and r.Field); record a
//		// KindForbidden as a denied request
//	} else if err != nil {
//		// a failure: log it, answer "something went wrong"
//	}
//
// An aggregate blocked by a dead head is unblocked by replaying or
// discarding that head (Replay, Discard): there is no separate unblock
// action, since releasing the messages behind a head without deciding
// what becomes of the head would break the aggregate's order.
package action

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/inbox"
)

// Audit actions recorded by this package.
const (
	AuditReplay     = "message.replay"
	AuditEditReplay = "message.edit_replay"
	AuditDiscard    = "message.discard"
	AuditRestore    = "message.restore"
	AuditJobStart   = "replay_job.start"
	AuditJobCancel  = "replay_job.cancel"
)

// Actor is who performs an action, as the caller's session says.
type Actor struct {
	// AccountID is the account's id; 0 when the actor is no account (the
	// demo admin, the command line).
	AccountID int64
	// Name is recorded as the audit row's actor and the replay's actor.
	Name string
	// Role is checked by every action.
	Role auth.Role
	// RemoteAddr is the client's address, for the audit row ("" if none).
	RemoteAddr string
}

// ActorOf is the Actor of a signed-in principal at remoteAddr.
func ActorOf(p auth.Principal, remoteAddr string) Actor {
	return Actor{AccountID: p.UserID, Name: p.Name, Role: p.Role, RemoteAddr: remoteAddr}
}

func (a Actor) accountID() *int64 {
	if a.AccountID == 0 {
		return nil
	}
	id := a.AccountID
	return &id
}

// Config holds what an action does after its commit. Every field is
// optional.
type Config struct {
	// ChangesCommitted is called after every committed action, which
	// appended changes to the feed (its audit row, at least): a
	// changefeed.Notifier's Poke. It must not block.
	ChangesCommitted func()
	// WakeDispatchers is called after an action that took effect, with a
	// context that outlives the caller's (the action has committed; a
	// client gone meanwhile must not cancel the wake-up): typically
	// outbox.Notify on the pool. A replay is a new outbox row and a
	// discarded or replayed dead head frees the messages behind it, so
	// the dispatchers need not wait for their next poll. Only an
	// optimisation: an error is logged, never returned.
	WakeDispatchers func(ctx context.Context) error
	// Logger receives the failures of WakeDispatchers. Default: discard.
	Logger *slog.Logger

	// The configuration actions' (settings.go) view of the process:
	// NATSURL is the NATS server of JetStream destinations, whose
	// streams DestinationSave checks ("": jetstream.DefaultURL); Getenv
	// reads the signing secrets a source's test event is signed with;
	// Inbox receives the test events of sources and is reloaded after a
	// source is saved (nil: sources cannot be tested here); InboxHandlers
	// names the Go handlers a source may run besides the built-in ones.
	NATSURL string
	Getenv  func(string) string
	// DestinationsSaved is called after a destination was saved (this
	// process's dispatcher rereads destinations now); nil: nothing.
	DestinationsSaved func()
	Inbox             *inbox.Receiver
	InboxHandlers     []string
}

// Service runs the actions. It holds no state but its Config and is safe
// for concurrent use; the zero Service is usable (no wake-ups).
type Service struct {
	cfg Config
}

// New returns a Service with cfg.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	return &Service{cfg: cfg}
}

// wakeTimeout bounds the dispatchers' wake-up after an action.
const wakeTimeout = 5 * time.Second

// effect is an action's change in tx. It may fill e's Target, Detail and
// Reason; applied=false means it took no effect (a request applied
// before): nothing is recorded then.
type effect func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (applied bool, err error)

// run runs do and the audit row it fills in one transaction, then wakes
// the change feed and, if do took effect, the dispatchers.
func (s *Service) run(ctx context.Context, pool *pgxpool.Pool, a Actor, e audit.Entry, do effect) error {
	if pool == nil {
		return noDatabase()
	}
	applied := false
	e.Actor, e.ActorID, e.Outcome, e.RemoteAddr = a.Name, a.accountID(), audit.OK, a.RemoteAddr
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		took, err := do(ctx, tx, &e)
		if err != nil || !took {
			return err
		}
		if _, err := audit.Record(ctx, tx, e); err != nil {
			return fmt.Errorf("record %s: %w", e.Action, err)
		}
		applied = true
		return nil
	})
	if err != nil {
		return err
	}
	if s.cfg.ChangesCommitted != nil {
		s.cfg.ChangesCommitted()
	}
	if applied && s.cfg.WakeDispatchers != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wakeTimeout)
		defer cancel()
		if err := s.cfg.WakeDispatchers(wctx); err != nil {
			s.cfg.Logger.WarnContext(ctx, "wake the dispatchers after an action", slog.String("action", e.Action), slog.Any("error", err))
		}
	}
	return nil
}

// messagesChanged appends a changefeed.KindMessageChanged change for each
// of ids in tx, the action's transaction, so that the change reaches the
// open pages of those messages if and only if the action commits.
func messagesChanged(ctx context.Context, tx pgx.Tx, action string, ids ...int64) error {
	payload, err := json.Marshal(map[string]string{"action": action})
	if err != nil {
		return fmt.Errorf("encode the change of %s: %w", action, err)
	}
	for _, id := range ids {
		err := changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindMessageChanged, Subject: strconv.FormatInt(id, 10), Payload: payload})
		if err != nil {
			return fmt.Errorf("message %d changed: %w", id, err)
		}
	}
	return nil
}

// messageTarget is the audit row's target of an action on message id.
func messageTarget(id int64) string { return "message " + strconv.FormatInt(id, 10) }
