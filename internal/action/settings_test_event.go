package action

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// TestTopic is the topic of a destination's test message and the type of
// a source's test event: a receiver can tell them apart and ignore them.
const TestTopic = "switchyard.test"

// testMaxAttempts bounds a test message's attempts, so a destination that
// fails shows it within seconds rather than after its whole retry policy.
const testMaxAttempts = 3

// DestinationTestInput names the destination to send a test message to.
type DestinationTestInput struct{ Name string }

// DestinationTested is the test message DestinationTest enqueued.
type DestinationTested struct {
	// ID is the outbox row's id, MessageID its idempotency key.
	ID        int64
	MessageID uuid.UUID
}

// DestinationTest enqueues a test message to a destination through the
// outbox, as any service would (topic TestTopic, header Switchyard-Test,
// at most testMaxAttempts attempts), in one transaction with its audit
// row: the dispatchers deliver it like any other, and the page follows its
// state. Role: admin. Refusals: KindForbidden, KindNotFound, KindConflict
// (a disabled destination, whose message would only wait).
func (s *Service) DestinationTest(ctx context.Context, pool *pgxpool.Pool, a Actor, in DestinationTestInput) (DestinationTested, error) {
	if err := requireAdmin(a); err != nil {
		return DestinationTested{}, err
	}
	if err := CheckText("name", in.Name, MaxSettingChars); err != nil {
		return DestinationTested{}, err
	}
	var out DestinationTested
	e := audit.Entry{Action: AuditDestinationTest, Target: "destination " + in.Name}
	err := s.run(ctx, pool, a, e, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
		q := queries.New(tx)
		row, err := q.DestinationGet(ctx, in.Name)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, &Refusal{Kind: KindNotFound, Message: "No such destination."}
		}
		if err != nil {
			return false, fmt.Errorf("read destination %s: %w", in.Name, err)
		}
		if row.Disabled {
			return false, conflict("This destination is disabled: a test message would wait until it is enabled. Enable it first.")
		}
		payload, err := json.Marshal(map[string]any{"type": TestTopic, "test": true, "destination": row.Name, "sent_by": a.Name})
		if err != nil {
			return false, fmt.Errorf("encode the test message: %w", err)
		}
		ids, err := outbox.Enqueue(ctx, tx, outbox.Message{
			Topic: TestTopic, Destination: row.Name, Payload: payload,
			Headers: map[string]string{"Switchyard-Test": "true"}, MaxAttempts: testMaxAttempts,
		})
		if err != nil {
			return false, fmt.Errorf("enqueue the test message of %s: %w", row.Name, err)
		}
		out.MessageID = ids[0]
		if out.ID, err = q.ConsoleMessageIDGetByMessageID(ctx, ids[0]); err != nil {
			return false, fmt.Errorf("read the test message of %s: %w", row.Name, err)
		}
		if err := configChanged(ctx, tx, "destination", row.Name, AuditDestinationTest); err != nil {
			return false, err
		}
		e.Detail, err = json.Marshal(map[string]any{"message": out.ID, "message_id": out.MessageID.String()})
		return true, err
	})
	if err != nil {
		return DestinationTested{}, err
	}
	return out, nil
}

// SourceTestInput names the inbox source to send a signed test event to.
type SourceTestInput struct{ Name string }

// SourceTested is what became of a source's test event.
type SourceTested struct {
	EventID string
	// Outcome is the inbox's (processed, duplicate, stale, held, failed, parked),
	// or "refused" when the receiver refused the request (Error says
	// why: the source disabled or misconfigured, the event malformed).
	Outcome string
	Error   string
}

// SourceTest signs a test event with the source's first secret, in its
// scheme, and hands it to this process's receiver (Config.Inbox) exactly
// as POST /inbox/{source} would: verified, deduplicated and run through
// the source's handler (a forward source enqueues it to its destination,
// a sql source calls its function with it: the event's "test": true lets
// a function tell it apart). The request and its outcome are audited
// after the inbox's own transaction. Role: admin. Refusals: KindForbidden,
// KindNotFound, KindInvalid (secret_refs: the secret is not set in this
// console's environment), KindUnavailable (no receiver here).
func (s *Service) SourceTest(ctx context.Context, pool *pgxpool.Pool, a Actor, in SourceTestInput) (SourceTested, error) {
	if err := requireAdmin(a); err != nil {
		return SourceTested{}, err
	}
	if err := CheckText("name", in.Name, MaxSettingChars); err != nil {
		return SourceTested{}, err
	}
	if pool == nil || s.cfg.Inbox == nil {
		return SourceTested{}, &Refusal{Kind: KindUnavailable, Message: "This console runs no inbox receiver: sources cannot be tested here."}
	}
	row, err := queries.New(pool).InboxSourceGet(ctx, in.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return SourceTested{}, &Refusal{Kind: KindNotFound, Message: "No such inbox source."}
	}
	if err != nil {
		return SourceTested{}, fmt.Errorf("read inbox source %s: %w", in.Name, err)
	}
	headers, body, id, err := s.signedTestEvent(row, a)
	if err != nil {
		return SourceTested{}, err
	}
	s.reloadInbox(ctx) // a source saved on another instance a moment ago
	out := SourceTested{EventID: id}
	res, err := s.cfg.Inbox.Accept(ctx, row.Name, headers, body)
	switch {
	case err == nil || errors.Is(err, inbox.ErrHandler):
		out.Outcome = string(res.Outcome)
		if err != nil {
			out.Error = err.Error()
		}
	case errors.Is(err, inbox.ErrMisconfigured), errors.Is(err, inbox.ErrMalformed), errors.Is(err, inbox.ErrInvalid),
		errors.Is(err, inbox.ErrUnknownSource), errors.Is(err, inbox.ErrSignature), errors.Is(err, inbox.ErrTransient):
		out.Outcome, out.Error = "refused", err.Error()
	default:
		return SourceTested{}, fmt.Errorf("test event of %s: %w", row.Name, err)
	}
	e := audit.Entry{Action: AuditSourceTest, Target: "inbox source " + row.Name}
	err = s.run(ctx, pool, a, e, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
		if err := configChanged(ctx, tx, "source", row.Name, AuditSourceTest); err != nil {
			return false, err
		}
		var err error
		e.Detail, err = json.Marshal(map[string]any{"event_id": out.EventID, "outcome": out.Outcome, "error": out.Error})
		return true, err
	})
	return out, err
}

// signedTestEvent is a test event for row, signed in its scheme with its
// first secret, and the event's id.
func (s *Service) signedTestEvent(row queries.SwitchyardInboxSource, a Actor) (http.Header, []byte, string, error) {
	if len(row.SecretRefs) == 0 || s.cfg.Getenv(row.SecretRefs[0]) == "" {
		ref := ""
		if len(row.SecretRefs) > 0 {
			ref = row.SecretRefs[0]
		}
		return nil, nil, "", invalid("secret_refs", fmt.Sprintf("The secret reference %s is not set in this console's environment: a test event cannot be signed.", ref))
	}
	secret := s.cfg.Getenv(row.SecretRefs[0])
	id := "evt_switchyard_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	doc := map[string]any{"id": id, "type": TestTopic, "test": true, "sent_by": a.Name}
	if row.EntityField != "" {
		setPath(doc, strings.Split(row.EntityField, "."), "switchyard-test")
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, "", fmt.Errorf("encode the test event: %w", err)
	}
	now := time.Now()
	headers := http.Header{"Content-Type": {"application/json"}, "Switchyard-Test": {"true"}}
	switch row.Scheme {
	case inbox.SchemeStripe:
		sig := inbox.StripeSignature(secret, now.Unix(), body)
		headers.Set(inbox.StripeHeader, "t="+strconv.FormatInt(now.Unix(), 10)+",v1="+hex.EncodeToString(sig))
	default:
		sig, err := webhook.Sign(secret, id, now, body)
		if err != nil {
			return nil, nil, "", invalid("secret_refs", fmt.Sprintf("The secret in %s cannot sign: %s.", row.SecretRefs[0], err))
		}
		headers.Set(webhook.HeaderID, id)
		headers.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		headers.Set(webhook.HeaderSignature, sig)
	}
	return headers, body, id, nil
}

// setPath sets doc's field at path to v, making the objects on the way
// (a field on the way that is no object is replaced).
func setPath(doc map[string]any, path []string, v any) {
	if len(path) == 1 {
		doc[path[0]] = v
		return
	}
	inner, ok := doc[path[0]].(map[string]any)
	if !ok {
		inner = map[string]any{}
		doc[path[0]] = inner
	}
	setPath(inner, path[1:], v)
}
