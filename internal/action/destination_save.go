package action

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/destination/jetstream"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/queries"
)

// Destination kinds the configuration pages offer (the table's CHECK).
const (
	KindWebhook   = "webhook"
	KindJetStream = "jetstream"
	KindFunction  = "function"
)

// Permanent-status policies of a destination (DestinationInput.Permanent).
const (
	// PermanentDefault: every 4xx but 401, 403, 404, 408 and 429 is
	// permanent (permanent_statuses NULL).
	PermanentDefault = "default"
	// PermanentList: exactly the statuses listed (none: every failure is
	// retried until the attempts run out).
	PermanentList = "list"
)

// DestinationInput is the destination form as typed. Field names in
// refusals are the form's: name, kind, address, secret_refs, concurrency,
// rate_per_second, burst, timeout_ms, breaker_failure_percent,
// breaker_min_requests, breaker_open_ms, retry_base_ms, retry_cap_ms,
// max_attempts, permanent, permanent_statuses.
type DestinationInput struct {
	// Create adds a new destination named Name; else Name is edited.
	Create bool
	Name   string
	Kind   string
	// Address: a webhook's URL, a JetStream destination's subject prefix,
	// a function destination's name in the embedding program.
	Address string
	// SecretRefs names the environment variables of the signing secrets,
	// one a line (several during a rotation: each delivery is signed with
	// every one). Never the secrets.
	SecretRefs                                   string
	Concurrency, RatePerSecond, Burst, TimeoutMs string
	BreakerFailurePercent, BreakerMinRequests    string
	BreakerOpenMs, RetryBaseMs, RetryCapMs       string
	MaxAttempts                                  string
	Permanent                                    string // PermanentDefault or PermanentList
	PermanentStatuses                            string
	Enabled                                      bool
}

// DestinationSaved is what DestinationSave did.
type DestinationSaved struct {
	Row queries.SwitchyardDestination
	// Check is what the check from outside found wrong (a JetStream
	// destination whose subjects no stream captures); "" when it passed
	// or there was nothing to check.
	Check string
}

// DestinationSave creates or edits a destination. A JetStream
// destination's stream is checked first, through the JetStream API within
// a short timeout: the check's verdict is saved with the row (and shown on
// the dashboard while it fails) but does not refuse the save, since the
// stream may be created afterwards. Role: admin. Refusals: KindForbidden,
// KindInvalid (naming the field), KindNotFound (editing a destination that
// does not exist), KindConflict (creating one whose name is taken).
func (s *Service) DestinationSave(ctx context.Context, pool *pgxpool.Pool, a Actor, in DestinationInput) (DestinationSaved, error) {
	if err := requireAdmin(a); err != nil {
		return DestinationSaved{}, err
	}
	p, err := parseDestination(in)
	if err != nil {
		return DestinationSaved{}, err
	}
	check := s.checkDestination(ctx, p)
	var out DestinationSaved
	e := audit.Entry{Action: AuditDestinationUpdate, Target: "destination " + p.Name}
	if in.Create {
		e.Action = AuditDestinationCreate
	}
	err = s.run(ctx, pool, a, e, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
		q := queries.New(tx)
		var before any
		if in.Create {
			n, err := q.DestinationInsert(ctx, p)
			if err != nil {
				return false, fmt.Errorf("insert destination %s: %w", p.Name, err)
			}
			if n == 0 {
				return false, conflict(fmt.Sprintf("A destination named %s exists already: edit it instead.", p.Name))
			}
		} else {
			prev, err := q.DestinationGetForUpdate(ctx, p.Name)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, &Refusal{Kind: KindNotFound, Message: "No such destination."}
			}
			if err != nil {
				return false, fmt.Errorf("read destination %s: %w", p.Name, err)
			}
			before = destinationDetail(prev)
			if _, err := q.DestinationUpdate(ctx, updateParams(p)); err != nil {
				return false, fmt.Errorf("update destination %s: %w", p.Name, err)
			}
		}
		row, err := q.DestinationGet(ctx, p.Name)
		if err != nil {
			return false, fmt.Errorf("read destination %s: %w", p.Name, err)
		}
		out = DestinationSaved{Row: row, Check: check}
		if err := saveCheck(ctx, q, p, check); err != nil {
			return false, err
		}
		if err := configChanged(ctx, tx, "destination", p.Name, e.Action); err != nil {
			return false, err
		}
		e.Detail, err = json.Marshal(map[string]any{"before": before, "after": destinationDetail(row), "check": check})
		return true, err
	})
	if err != nil {
		return DestinationSaved{}, err
	}
	if s.cfg.DestinationsSaved != nil {
		s.cfg.DestinationsSaved()
	}
	return out, nil
}

// saveCheck keeps the check's verdict of a JetStream destination, and
// drops any of another kind.
func saveCheck(ctx context.Context, q *queries.Queries, p queries.DestinationInsertParams, check string) error {
	var err error
	if p.Kind == KindJetStream {
		err = q.DestinationCheckSave(ctx, queries.DestinationCheckSaveParams{Destination: p.Name, Problem: check})
	} else {
		err = q.DestinationCheckDelete(ctx, p.Name)
	}
	if err != nil {
		return fmt.Errorf("save the check of destination %s: %w", p.Name, err)
	}
	return nil
}

// checkDestination checks from outside what the row alone cannot say:
// whether a stream captures a JetStream destination's subjects.
func (s *Service) checkDestination(ctx context.Context, p queries.DestinationInsertParams) string {
	if p.Kind != KindJetStream {
		return ""
	}
	err := jetstream.CheckCapture(ctx, jetstream.Config{URL: s.cfg.NATSURL, SubjectPrefix: p.Address})
	if err == nil {
		return ""
	}
	return clipProblem(err.Error())
}

// clipProblem keeps a check's text within the table's bound.
func clipProblem(s string) string {
	if r := []rune(s); len(r) > 1000 {
		return string(r[:1000]) + "…"
	}
	return s
}

// destinationDetail is a destination's row as its audit row records it:
// settings and secret references, never secrets.
func destinationDetail(r queries.SwitchyardDestination) map[string]any {
	return map[string]any{
		"kind": r.Kind, "address": r.Address, "secret_refs": destinationRefs(r), "enabled": !r.Disabled,
		"concurrency": r.Concurrency, "rate_per_second": r.RatePerSecond, "burst": r.Burst, "timeout_ms": r.TimeoutMs,
		"breaker_failure_ratio": r.BreakerFailureRatio, "breaker_min_requests": r.BreakerMinRequests,
		"breaker_open_ms": r.BreakerOpenMs, "retry_base_ms": r.RetryBaseMs, "retry_cap_ms": r.RetryCapMs,
		"max_attempts": r.MaxAttempts, "permanent_statuses": r.PermanentStatuses,
	}
}

// destinationRefs is every secret reference of r, secret_ref first.
func destinationRefs(r queries.SwitchyardDestination) []string {
	if r.SecretRef == "" {
		return r.SecretRefs
	}
	return append([]string{r.SecretRef}, r.SecretRefs...)
}

// parseDestination checks every field of in, in the form's order, and
// returns the row it describes.
func parseDestination(in DestinationInput) (queries.DestinationInsertParams, error) {
	p := queries.DestinationInsertParams{Name: in.Name, Kind: in.Kind, Address: strings.TrimSpace(in.Address), Disabled: !in.Enabled}
	if err := checkName(in.Name, "destination"); err != nil {
		return p, err
	}
	if err := checkAddress(p.Kind, p.Address); err != nil {
		return p, err
	}
	refs, err := parseSecretRefs("secret_refs", in.SecretRefs)
	if err != nil {
		return p, err
	}
	if p.Kind == KindWebhook && len(refs) == 0 {
		return p, invalid("secret_refs", "A webhook destination signs every delivery: name at least one environment variable that holds a signing secret (whsec_…).")
	}
	p.SecretRefs = refs
	if len(refs) > 0 { // the first is secret_ref, as rows written by hand have it
		p.SecretRef, p.SecretRefs = refs[0], refs[1:]
	}
	if err := parseDelivery(in, &p); err != nil {
		return p, err
	}
	p.PermanentStatuses, err = parsePermanent(in.Permanent, in.PermanentStatuses)
	return p, err
}

// checkAddress checks the address field for kind.
func checkAddress(kind, address string) error {
	if err := CheckText("address", address, MaxSettingChars); err != nil {
		return err
	}
	var err error
	switch kind {
	case KindWebhook:
		err = webhook.CheckURL(address)
	case KindJetStream:
		err = jetstream.CheckPrefix(address)
	case KindFunction:
		if address == "" {
			err = errors.New("name the function the embedding program registered")
		}
	default:
		return invalid("kind", "The kind must be webhook, jetstream or function.")
	}
	if err != nil {
		return invalid("address", fmt.Sprintf("The address is not valid for a %s destination: %s.", kind, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "webhook: "), "jetstream: ")))
	}
	return nil
}

// parseDelivery parses the bulkhead, rate, timeout, breaker and retry
// fields into p.
func parseDelivery(in DestinationInput, p *queries.DestinationInsertParams) error {
	var err error
	fields := []struct {
		field, text string
		lo, hi      int64
		unit        string
		into        *int32
	}{
		{"concurrency", in.Concurrency, 1, 10000, " deliveries at once", &p.Concurrency},
		{"burst", in.Burst, 1, 100000, "", &p.Burst},
		{"timeout_ms", in.TimeoutMs, 1, 600000, " ms", &p.TimeoutMs},
		{"breaker_min_requests", in.BreakerMinRequests, 1, 100000, "", &p.BreakerMinRequests},
		{"breaker_open_ms", in.BreakerOpenMs, 1, 86400000, " ms", &p.BreakerOpenMs},
		{"retry_base_ms", in.RetryBaseMs, 1, 86400000, " ms", &p.RetryBaseMs},
		{"retry_cap_ms", in.RetryCapMs, 1, 7 * 86400000, " ms", &p.RetryCapMs},
		{"max_attempts", in.MaxAttempts, 1, 1000, "", &p.MaxAttempts},
	}
	if p.RatePerSecond, err = floatField("rate_per_second", cmp.Or(strings.TrimSpace(in.RatePerSecond), "0"), 0, 1e6, " per second (0: unlimited)"); err != nil {
		return err
	}
	percent, err := floatField("breaker_failure_percent", in.BreakerFailurePercent, 1, 100, " %")
	if err != nil {
		return err
	}
	p.BreakerFailureRatio = math.Round(percent*100) / 10000
	for _, f := range fields {
		if *f.into, err = intField(f.field, f.text, f.lo, f.hi, f.unit); err != nil {
			return err
		}
	}
	if p.RetryCapMs < p.RetryBaseMs {
		return invalid("retry_cap_ms", fmt.Sprintf("The longest retry delay (%d ms) must be at least the first one (%d ms).", p.RetryCapMs, p.RetryBaseMs))
	}
	return nil
}

// parsePermanent parses the delivery policy: nil for the default, else
// the statuses listed (an empty, non-nil list: none permanent).
func parsePermanent(policy, text string) ([]int32, error) {
	switch policy {
	case PermanentDefault, "":
		return nil, nil
	case PermanentList:
	default:
		return nil, invalid("permanent", "The policy must be the default or a list of statuses.")
	}
	if err := CheckText("permanent_statuses", text, MaxSettingChars); err != nil {
		return nil, err
	}
	statuses := []int32{}
	for _, item := range splitList(text) {
		n, err := intField("permanent_statuses", item, 400, 599, "")
		if err != nil {
			return nil, invalid("permanent_statuses", fmt.Sprintf("%q is not an HTTP status from 400 to 599: list the statuses that dead-letter at once, such as 400, 410, 422.", clip(item)))
		}
		statuses = append(statuses, n)
	}
	return statuses, nil
}

// updateParams is p as DestinationUpdate's parameters.
func updateParams(p queries.DestinationInsertParams) queries.DestinationUpdateParams {
	return queries.DestinationUpdateParams{
		Name: p.Name, Kind: p.Kind, Address: p.Address, SecretRef: p.SecretRef, SecretRefs: p.SecretRefs,
		RetryBaseMs: p.RetryBaseMs, RetryCapMs: p.RetryCapMs, MaxAttempts: p.MaxAttempts, TimeoutMs: p.TimeoutMs,
		RatePerSecond: p.RatePerSecond, Burst: p.Burst, Concurrency: p.Concurrency,
		BreakerFailureRatio: p.BreakerFailureRatio, BreakerMinRequests: p.BreakerMinRequests,
		BreakerOpenMs: p.BreakerOpenMs, PermanentStatuses: p.PermanentStatuses, Disabled: p.Disabled,
	}
}
