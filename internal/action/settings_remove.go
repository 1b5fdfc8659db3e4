package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/queries"
)

// Renames and deletes of destinations and inbox sources. A name is what
// other systems hold: services enqueue to a destination by its name (in
// any language, with an INSERT), senders post to /inbox/{source}, and the
// records that keep the invariants are keyed by it (every message keeps
// the destination it was enqueued to, with its aggregate's sequence; every
// event id a source took is its dedupe record). So:
//
//   - A rename is for a name nothing has used yet (a typo fixed before
//     the first message or event): a destination that any message names,
//     or a source that recorded any event, is refused, with what to do
//     instead. Forward sources that name a renamed destination follow it.
//   - A destination is deleted only when nothing is left to deliver or to
//     decide: no pending message (one in flight is pending too), no dead
//     one (an operator may replay it, which needs the destination), no
//     forward source and no reconciliation check naming it. Its delivered
//     and discarded messages, history only, are deleted with it.
//   - A source is deleted only when none of its events waits for an
//     operator (failed, parked, held: a retry needs the source). Its
//     processed events stay, as the dedupe record, until retention: a
//     source created again under the same name applies none of them twice.

// Audit actions of renames and deletes.
const (
	AuditDestinationRename = "destination.rename"
	AuditDestinationDelete = "destination.delete"
	AuditSourceRename      = "inbox_source.rename"
	AuditSourceDelete      = "inbox_source.delete"
)

// RenameInput renames destination or source Name to NewName (the form's
// field new_name).
type RenameInput struct {
	Name, NewName string
}

// DeleteInput deletes destination or source Name; Confirmed is the form's
// confirm box, which a delete needs.
type DeleteInput struct {
	Name      string
	Confirmed bool
}

// Deleted is what a delete did.
type Deleted struct {
	// Settled is how many delivered and discarded messages of a deleted
	// destination were deleted with it (0 for a source).
	Settled int64
}

// checkRename checks that a may rename and the new name.
func checkRename(a Actor, in RenameInput, what string) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	if err := CheckText("new_name", in.NewName, MaxSettingChars); err != nil {
		return err
	}
	if !namePattern.MatchString(in.NewName) {
		return invalid("new_name", fmt.Sprintf("A %s's name is 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit.", what))
	}
	if in.NewName == in.Name {
		return invalid("new_name", "The new name is the current one.")
	}
	return nil
}

// checkDelete checks that a may delete and has confirmed it.
func checkDelete(a Actor, in DeleteInput) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	if !in.Confirmed {
		return invalid("confirm", "Tick the box to confirm the delete.")
	}
	return nil
}

// settingChange is one rename or delete of a destination (Row is its row,
// Use what names it) or of an inbox source (its row, what it recorded).
// changeSetting runs it; destinationChange and sourceChange fill in what
// depends only on which of the two it is, each action the rest.
type settingChange[Row, Use any] struct {
	action string // the audit action
	// kind is the config change's ("destination" or "source"), label
	// what its messages and audit target call it ("inbox source").
	kind, label string
	// name is the row's; newName a rename's ("" for a delete). A config
	// change is published for each.
	name, newName string
	// get reads and locks the row; lock, when set, then holds off what
	// would start using it (a destination's enqueues); usage reads what
	// uses it.
	get   func(*queries.Queries, context.Context, string) (Row, error)
	lock  func(*queries.Queries, context.Context, string) error
	usage func(*queries.Queries, context.Context, string) (Use, error)
	// refuse says why use refuses the change (nil: it does not); apply
	// changes the row; detail is the audit row's detail, once applied.
	refuse func(Use) error
	apply  func(context.Context, *queries.Queries) error
	detail func(prev Row, use Use) map[string]any
	// reload makes this process use the settings as they are now.
	reload func(context.Context)
}

// changeSetting runs c in one transaction: lock the row, check what
// refuses, apply, audit, publish a config change; committed, it reloads.
func changeSetting[Row, Use any](ctx context.Context, s *Service, pool *pgxpool.Pool, a Actor, c settingChange[Row, Use]) error {
	e := audit.Entry{Action: c.action, Target: c.label + " " + c.name}
	err := s.run(ctx, pool, a, e, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
		q := queries.New(tx)
		prev, err := c.get(q, ctx, c.name)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, &Refusal{Kind: KindNotFound, Message: "No such " + c.label + "."}
		}
		if err != nil {
			return false, fmt.Errorf("read %s %s: %w", c.label, c.name, err)
		}
		if c.lock != nil {
			if err := c.lock(q, ctx, c.name); isLockNotAvailable(err) {
				return false, conflict(fmt.Sprintf("%s %s is in use right now (a transaction that writes to it has not ended within 5 s): try again.", capitalized(c.label), c.name))
			} else if err != nil {
				return false, fmt.Errorf("hold off new uses of %s %s: %w", c.label, c.name, err)
			}
		}
		use, err := c.usage(q, ctx, c.name)
		if err != nil {
			return false, fmt.Errorf("read what uses %s %s: %w", c.label, c.name, err)
		}
		if err := c.refuse(use); err != nil {
			return false, err
		}
		if err := c.apply(ctx, q); err != nil {
			return false, err
		}
		for _, name := range []string{c.name, c.newName} {
			if name == "" {
				continue
			}
			if err := configChanged(ctx, tx, c.kind, name, e.Action); err != nil {
				return false, err
			}
		}
		e.Detail, err = json.Marshal(c.detail(prev, use))
		return true, err
	})
	if err != nil {
		return err
	}
	c.reload(ctx)
	return nil
}

// renameFailed is a rename's failed statement: a conflict on new_name
// when that name is taken (a unique violation), else err.
func renameFailed[Row, Use any](c settingChange[Row, Use], err error) error {
	if isUniqueViolation(err) {
		return &Refusal{Kind: KindConflict, Field: "new_name", Message: fmt.Sprintf("%s named %s exists already.", article(c.label), c.newName)}
	}
	return fmt.Errorf("rename %s %s: %w", c.label, c.name, err)
}

// article is label with its indefinite article, capitalised.
func article(label string) string {
	if strings.ContainsAny(label[:1], "aeiou") {
		return "An " + label
	}
	return "A " + label
}

// capitalized is label with its first letter in upper case.
func capitalized(label string) string {
	return strings.ToUpper(label[:1]) + label[1:]
}

// destinationChange is a rename or delete of destination name. Its lock
// (migration 00022) waits for the enqueues to name in progress and holds
// off new ones until the commit, so that the usage it counts is all there
// is: an enqueue held off finds the destination gone (or renamed) and is
// refused; none is left naming a destination that no longer exists.
func (s *Service) destinationChange(action, name string) settingChange[queries.SwitchyardDestination, queries.DestinationUsageRow] {
	return settingChange[queries.SwitchyardDestination, queries.DestinationUsageRow]{
		action: action, kind: "destination", label: "destination", name: name,
		get: (*queries.Queries).DestinationGetForUpdate, lock: (*queries.Queries).DestinationLockEnqueues,
		usage:  (*queries.Queries).DestinationUsage,
		reload: s.destinationsChanged,
	}
}

// sourceChange is a rename or delete of inbox source name.
func (s *Service) sourceChange(action, name string) settingChange[queries.SwitchyardInboxSource, queries.InboxSourceUsageRow] {
	return settingChange[queries.SwitchyardInboxSource, queries.InboxSourceUsageRow]{
		action: action, kind: "source", label: "inbox source", name: name,
		get: (*queries.Queries).InboxSourceGetForUpdate, usage: (*queries.Queries).InboxSourceUsage,
		reload: s.reloadInbox,
	}
}

// DestinationRename renames a destination that no message names yet.
// Forward sources naming it follow in the same transaction; every
// dispatcher and receiver uses the new name within 10 s (this process's at
// once). Role: admin. Refusals: KindForbidden, KindInvalid (new_name),
// KindNotFound, KindConflict (the new name is taken; messages or a
// reconciliation check name it).
func (s *Service) DestinationRename(ctx context.Context, pool *pgxpool.Pool, a Actor, in RenameInput) error {
	if err := checkRename(a, in, "destination"); err != nil {
		return err
	}
	c := s.destinationChange(AuditDestinationRename, in.Name)
	c.newName = in.NewName
	c.refuse = func(use queries.DestinationUsageRow) error {
		if n := use.Pending + use.Dead + use.Settled; n > 0 {
			return conflict(fmt.Sprintf("Destination %s cannot be renamed: %s name it, and every message keeps the destination it was enqueued to (its services enqueue by that name too). "+
				"Add a destination named %s, point the services and sources at it, and delete this one once its messages are settled.", in.Name, count(n, "message"), in.NewName))
		}
		if len(use.ReconcileChecks) > 0 {
			return conflict(fmt.Sprintf("Destination %s cannot be renamed: the reconciliation check %s repairs through it.", in.Name, strings.Join(use.ReconcileChecks, ", ")))
		}
		return nil
	}
	c.apply = func(ctx context.Context, q *queries.Queries) error {
		if _, err := q.DestinationRename(ctx, queries.DestinationRenameParams{NewName: in.NewName, Name: in.Name}); err != nil {
			return renameFailed(c, err)
		}
		if _, err := q.InboxSourceForwardRename(ctx, queries.InboxSourceForwardRenameParams{NewName: in.NewName, Name: in.Name}); err != nil {
			return fmt.Errorf("point the forward sources of %s at %s: %w", in.Name, in.NewName, err)
		}
		return nil
	}
	c.detail = func(prev queries.SwitchyardDestination, use queries.DestinationUsageRow) map[string]any {
		return map[string]any{"renamed_to": in.NewName, "before": destinationDetail(prev), "forward_sources": use.ForwardingSources}
	}
	return changeSetting(ctx, s, pool, a, c)
}

// DestinationDelete deletes a destination with nothing left to deliver or
// decide (see above), and its delivered and discarded messages. Role:
// admin. Refusals: KindForbidden, KindInvalid (confirm), KindNotFound,
// KindConflict (pending or dead messages, a forward source or a
// reconciliation check naming it), each saying what to do.
func (s *Service) DestinationDelete(ctx context.Context, pool *pgxpool.Pool, a Actor, in DeleteInput) (Deleted, error) {
	if err := checkDelete(a, in); err != nil {
		return Deleted{}, err
	}
	var out Deleted
	c := s.destinationChange(AuditDestinationDelete, in.Name)
	c.refuse = func(use queries.DestinationUsageRow) error { return deleteRefusal(in.Name, use) }
	c.apply = func(ctx context.Context, q *queries.Queries) error {
		var err error
		if out.Settled, err = q.DestinationDeleteSettled(ctx, in.Name); err != nil {
			return fmt.Errorf("delete the settled messages of %s: %w", in.Name, err)
		}
		if _, err := q.DestinationDelete(ctx, in.Name); err != nil {
			if isForeignKeyViolation(err) { // a message restored meanwhile
				return conflict(fmt.Sprintf("Destination %s got a message to deliver or decide while it was being deleted: look at its messages and try again.", in.Name))
			}
			return fmt.Errorf("delete destination %s: %w", in.Name, err)
		}
		return nil
	}
	c.detail = func(prev queries.SwitchyardDestination, _ queries.DestinationUsageRow) map[string]any {
		return map[string]any{"before": destinationDetail(prev), "settled_messages_deleted": out.Settled}
	}
	if err := changeSetting(ctx, s, pool, a, c); err != nil {
		return Deleted{}, err
	}
	return out, nil
}

// deleteRefusal is why destination name may not be deleted, nil if it may.
func deleteRefusal(name string, use queries.DestinationUsageRow) error {
	switch {
	case use.Pending > 0:
		return conflict(fmt.Sprintf("Destination %s still has %s to deliver: they would be lost. Disable it and wait until they are delivered, or discard them on the messages page, then delete it.", name, count(use.Pending, "pending message")))
	case use.Dead > 0:
		return conflict(fmt.Sprintf("Destination %s has %s: an operator may still replay them, which needs the destination. Replay or discard them first.", name, count(use.Dead, "dead message")))
	case len(use.ForwardingSources) > 0:
		return conflict(fmt.Sprintf("The inbox source %s forwards to destination %s: point it at another destination or delete it first.", strings.Join(use.ForwardingSources, ", "), name))
	case len(use.ReconcileChecks) > 0:
		return conflict(fmt.Sprintf("The reconciliation check %s repairs through destination %s: remove it first.", strings.Join(use.ReconcileChecks, ", "), name))
	}
	return nil
}

// destinationsChanged makes this process use the destinations and
// sources as they are now: its dispatcher's routes and its receiver's
// sources (a forward source may have followed a rename).
func (s *Service) destinationsChanged(ctx context.Context) {
	if s.cfg.DestinationsSaved != nil {
		s.cfg.DestinationsSaved()
	}
	s.reloadInbox(ctx)
}

// SourceRename renames an inbox source that has recorded no event yet:
// its senders must post to the new URL. Role: admin. Refusals:
// KindForbidden, KindInvalid (new_name), KindNotFound, KindConflict (the
// name is taken; the source has recorded events).
func (s *Service) SourceRename(ctx context.Context, pool *pgxpool.Pool, a Actor, in RenameInput) error {
	if err := checkRename(a, in, "source"); err != nil {
		return err
	}
	c := s.sourceChange(AuditSourceRename, in.Name)
	c.newName = in.NewName
	c.refuse = func(use queries.InboxSourceUsageRow) error {
		if use.Events > 0 || use.Duplicates {
			return conflict(fmt.Sprintf("Inbox source %s cannot be renamed: it has recorded %s, and the event ids it took are its dedupe record (a sender's redelivery to a new name would be applied again). "+
				"Add a source named %s, move the senders to it, and delete this one.", in.Name, count(use.Events, "event"), in.NewName))
		}
		return nil
	}
	c.apply = func(ctx context.Context, q *queries.Queries) error {
		if _, err := q.InboxSourceRename(ctx, queries.InboxSourceRenameParams{NewName: in.NewName, Name: in.Name}); err != nil {
			return renameFailed(c, err)
		}
		return nil
	}
	c.detail = func(prev queries.SwitchyardInboxSource, _ queries.InboxSourceUsageRow) map[string]any {
		return map[string]any{"renamed_to": in.NewName, "before": sourceDetail(prev)}
	}
	return changeSetting(ctx, s, pool, a, c)
}

// SourceDelete deletes an inbox source none of whose events waits for an
// operator. Its senders are answered 404 from then on (every instance
// within 10 s); its processed events stay until retention. Role: admin.
// Refusals: KindForbidden, KindInvalid (confirm), KindNotFound,
// KindConflict (events waiting).
func (s *Service) SourceDelete(ctx context.Context, pool *pgxpool.Pool, a Actor, in DeleteInput) (Deleted, error) {
	if err := checkDelete(a, in); err != nil {
		return Deleted{}, err
	}
	c := s.sourceChange(AuditSourceDelete, in.Name)
	c.refuse = func(use queries.InboxSourceUsageRow) error {
		if use.Waiting > 0 {
			return conflict(fmt.Sprintf("Inbox source %s has %s waiting for an operator (failed, parked or held): a retry needs the source. Retry them until they are processed first.", in.Name, count(use.Waiting, "event")))
		}
		return nil
	}
	c.apply = func(ctx context.Context, q *queries.Queries) error {
		if _, err := q.InboxSourceDelete(ctx, in.Name); err != nil {
			return fmt.Errorf("delete inbox source %s: %w", in.Name, err)
		}
		return nil
	}
	c.detail = func(prev queries.SwitchyardInboxSource, use queries.InboxSourceUsageRow) map[string]any {
		return map[string]any{"before": sourceDetail(prev), "events_kept": use.Events}
	}
	return Deleted{}, changeSetting(ctx, s, pool, a, c)
}

func count(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// isLockNotAvailable: a lock was not had within its timeout.
func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
