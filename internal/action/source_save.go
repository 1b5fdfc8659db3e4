package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// SourceInput is the inbox source form as typed. Field names in refusals
// are the form's: name, scheme, secret_refs, handler, forward_to,
// entity_field, sql_function, tolerance_seconds, out_of_order,
// max_attempts.
type SourceInput struct {
	// Create adds a new source named Name; else Name is edited.
	Create bool
	Name   string
	// Scheme is inbox.SchemeStandardWebhooks or inbox.SchemeStripe.
	Scheme string
	// SecretRefs names the environment variables of the verifying
	// secrets, one a line (several during a rotation).
	SecretRefs string
	// Handler is inbox.HandlerForward, inbox.HandlerSQL or a Go handler
	// the console registered (Config.InboxHandlers).
	Handler string
	// ForwardTo and EntityField: the forward handler's destination and
	// the payload field that orders one entity's messages ("" unordered).
	ForwardTo, EntityField string
	// SQLFunction: the sql handler's schema.function(event jsonb,
	// headers jsonb).
	SQLFunction      string
	ToleranceSeconds string
	// OutOfOrder is "apply" or "hold".
	OutOfOrder  string
	MaxAttempts string
	Enabled     bool
}

// SourceSaved is what SourceSave did.
type SourceSaved struct {
	Row queries.SwitchyardInboxSource
}

var (
	sqlFunctionPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$`)
	entityFieldPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

// SourceSave creates or edits an inbox source. Every receiver rereads the
// sources within 10 s; this process's (Config.Inbox) at once. Role: admin.
// Refusals: KindForbidden, KindInvalid (naming the field: also a forward
// handler's destination that does not exist, or a sql handler's function
// that does not exist), KindNotFound, KindConflict (a name taken).
func (s *Service) SourceSave(ctx context.Context, pool *pgxpool.Pool, a Actor, in SourceInput) (SourceSaved, error) {
	if err := requireAdmin(a); err != nil {
		return SourceSaved{}, err
	}
	p, err := s.parseSource(in)
	if err != nil {
		return SourceSaved{}, err
	}
	var out SourceSaved
	e := audit.Entry{Action: AuditSourceUpdate, Target: "inbox source " + p.Name}
	if in.Create {
		e.Action = AuditSourceCreate
	}
	err = s.run(ctx, pool, a, e, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
		q := queries.New(tx)
		if err := checkSourceTargets(ctx, q, p); err != nil {
			return false, err
		}
		var before any
		if in.Create {
			n, err := q.InboxSourceInsert(ctx, p)
			if err != nil {
				return false, fmt.Errorf("insert inbox source %s: %w", p.Name, err)
			}
			if n == 0 {
				return false, conflict(fmt.Sprintf("An inbox source named %s exists already: edit it instead.", p.Name))
			}
		} else {
			prev, err := q.InboxSourceGetForUpdate(ctx, p.Name)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, &Refusal{Kind: KindNotFound, Message: "No such inbox source."}
			}
			if err != nil {
				return false, fmt.Errorf("read inbox source %s: %w", p.Name, err)
			}
			before = sourceDetail(prev)
			if _, err := q.InboxSourceUpdate(ctx, queries.InboxSourceUpdateParams{Scheme: p.Scheme, SecretRefs: p.SecretRefs, ToleranceSeconds: p.ToleranceSeconds,
				OutOfOrder: p.OutOfOrder, Handler: p.Handler, MaxAttempts: p.MaxAttempts, ForwardTo: p.ForwardTo,
				EntityField: p.EntityField, SqlFunction: p.SqlFunction, Disabled: p.Disabled, Name: p.Name}); err != nil {
				return false, fmt.Errorf("update inbox source %s: %w", p.Name, err)
			}
		}
		row, err := q.InboxSourceGet(ctx, p.Name)
		if err != nil {
			return false, fmt.Errorf("read inbox source %s: %w", p.Name, err)
		}
		out.Row = row
		if err := configChanged(ctx, tx, "source", p.Name, e.Action); err != nil {
			return false, err
		}
		e.Detail, err = json.Marshal(map[string]any{"before": before, "after": sourceDetail(row)})
		return true, err
	})
	if err != nil {
		return SourceSaved{}, err
	}
	s.reloadInbox(ctx)
	return out, nil
}

// reloadInbox makes this process's receiver use the sources as saved now,
// rather than at its next reread; the other processes reread within 10 s.
func (s *Service) reloadInbox(ctx context.Context) {
	if s.cfg.Inbox == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.cfg.Inbox.Load(rctx); err != nil {
		s.cfg.Logger.WarnContext(ctx, "reload inbox sources after a save", "error", err)
	}
}

// checkSourceTargets checks, in the save's transaction, what a built-in
// handler names: the forward handler's destination, the sql handler's
// function.
func checkSourceTargets(ctx context.Context, q *queries.Queries, p queries.InboxSourceInsertParams) error {
	switch p.Handler {
	case inbox.HandlerForward:
		known, err := q.DestinationListKnown(ctx, []string{p.ForwardTo})
		if err != nil {
			return fmt.Errorf("check destination %s: %w", p.ForwardTo, err)
		}
		if len(known) == 0 {
			return invalid("forward_to", fmt.Sprintf("No destination is named %s: add it on the destinations page first, or pick one of the list.", p.ForwardTo))
		}
	case inbox.HandlerSQL:
		found, err := q.InboxSourceFunctionExists(ctx, p.SqlFunction)
		if err != nil {
			return fmt.Errorf("check function %s: %w", p.SqlFunction, err)
		}
		if !found {
			return invalid("sql_function", fmt.Sprintf("No function %s(jsonb, jsonb) exists in this database: create it first (docs/inbox.md has an example).", p.SqlFunction))
		}
	}
	return nil
}

// sourceDetail is a source's row as its audit row records it.
func sourceDetail(r queries.SwitchyardInboxSource) map[string]any {
	return map[string]any{
		"scheme": r.Scheme, "secret_refs": r.SecretRefs, "handler": r.Handler, "forward_to": r.ForwardTo,
		"entity_field": r.EntityField, "sql_function": r.SqlFunction, "tolerance_seconds": r.ToleranceSeconds,
		"out_of_order": r.OutOfOrder, "max_attempts": r.MaxAttempts, "enabled": !r.Disabled,
	}
}

// parseSource checks every field of in, in the form's order, and returns
// the row it describes.
func (s *Service) parseSource(in SourceInput) (queries.InboxSourceInsertParams, error) {
	p := queries.InboxSourceInsertParams{Name: in.Name, Scheme: in.Scheme, Handler: in.Handler, OutOfOrder: in.OutOfOrder, Disabled: !in.Enabled}
	if err := checkName(in.Name, "source"); err != nil {
		return p, err
	}
	if p.Scheme != inbox.SchemeStandardWebhooks && p.Scheme != inbox.SchemeStripe {
		return p, invalid("scheme", "The scheme must be standard-webhooks or stripe.")
	}
	refs, err := parseSecretRefs("secret_refs", in.SecretRefs)
	if err != nil {
		return p, err
	}
	if len(refs) == 0 {
		return p, invalid("secret_refs", "A source verifies every request: name at least one environment variable that holds its signing secret.")
	}
	p.SecretRefs = refs
	if err := s.parseHandler(in, &p); err != nil {
		return p, err
	}
	if p.ToleranceSeconds, err = intField("tolerance_seconds", in.ToleranceSeconds, 1, 86400, " seconds"); err != nil {
		return p, err
	}
	if p.OutOfOrder != string(inbox.OutOfOrderApply) && p.OutOfOrder != string(inbox.OutOfOrderHold) {
		return p, invalid("out_of_order", "The out-of-order policy must be apply or hold.")
	}
	p.MaxAttempts, err = intField("max_attempts", in.MaxAttempts, 1, 1000, "")
	return p, err
}

// parseHandler checks the handler and its parameters into p.
func (s *Service) parseHandler(in SourceInput, p *queries.InboxSourceInsertParams) error {
	for _, f := range []struct{ name, value string }{{"handler", in.Handler}, {"forward_to", in.ForwardTo}, {"entity_field", in.EntityField}, {"sql_function", in.SQLFunction}} {
		if err := CheckText(f.name, f.value, MaxSettingChars); err != nil {
			return err
		}
	}
	switch in.Handler {
	case inbox.HandlerForward:
		p.ForwardTo, p.EntityField = strings.TrimSpace(in.ForwardTo), strings.TrimSpace(in.EntityField)
		if p.ForwardTo == "" {
			return invalid("forward_to", "The forward handler needs the destination to forward each event to.")
		}
		if p.EntityField != "" && !entityFieldPattern.MatchString(p.EntityField) {
			return invalid("entity_field", fmt.Sprintf("%q is not a dotted path of payload field names (such as data.customer.id).", clip(p.EntityField)))
		}
	case inbox.HandlerSQL:
		p.SqlFunction = strings.TrimSpace(in.SQLFunction)
		if !sqlFunctionPattern.MatchString(p.SqlFunction) {
			return invalid("sql_function", fmt.Sprintf("%q is not schema.function in lower-case letters, digits and '_' (such as billing.record_payment).", clip(p.SqlFunction)))
		}
	case "":
		return invalid("handler", "Choose what the source does with each event: forward, sql, or a Go handler.")
	default:
		if !slices.Contains(s.cfg.InboxHandlers, in.Handler) {
			return invalid("handler", fmt.Sprintf("No handler named %q: choose forward, sql or one of the Go handlers this console registered (%s).", clip(in.Handler), handlerNames(s.cfg.InboxHandlers)))
		}
	}
	return nil
}

func handlerNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
