package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// Errors of Receiver.Accept, besides ErrSignature, ErrHandler and
// ErrInvalid; test them with errors.Is. Nothing is stored when one of them
// (or ErrSignature) is returned.
var (
	ErrUnknownSource = errors.New("inbox: unknown source")
	// ErrMalformed: the signed body is not a JSON object, or lacks what the
	// scheme or the handler needs (an event id, an entity version).
	ErrMalformed = errors.New("inbox: malformed event")
	// ErrMisconfigured: the source names a handler nobody registered, or a
	// secret that is not set. The sender should retry; an operator must
	// fix the configuration.
	ErrMisconfigured = errors.New("inbox: source misconfigured")
)

// Registration is a Go handler that sources can name.
type Registration struct {
	Handle Handler
	// Entity returns the entity key and version an event's payload names,
	// for out-of-order resolution; key "" means none. An error makes the
	// event malformed. Nil: events of this handler are unordered.
	Entity func(payload []byte) (key string, version int64, err error)
	// Once, when set, receives an event without an entity version in one
	// statement of the handler's own, where Handle takes three round trips
	// (the claim with its BEGIN, Handle's statements, the COMMIT): the
	// statement claims the event with switchyard.inbox_claim (migration
	// 00029), applies Handle's effect only when the claim returns an event
	// id above 0, and Once returns that id (0: a duplicate, which the
	// claim counted). Run on its own, the statement's implicit transaction
	// is the event's. Any error sends the event down Handle's path, which
	// must have the same effect: a failure is recorded there, as for any
	// handler (a statement that failed wrote nothing). The messages such a
	// statement enqueues are not linked to the event.
	Once func(ctx context.Context, pool *pgxpool.Pool, ev Event, c Claim) (eventRow int64, err error)
	// once, for a built-in handler, receives an event without an entity
	// version in one statement when it can (forwardSpec, sqlSpec).
	once onceReceiver
}

// Claim is what a Registration.Once statement passes to
// switchyard.inbox_claim: (source, event id, headers, payload, slot).
type Claim struct {
	Source, EventID string
	// Headers is the JSON object of the request headers the inbox keeps.
	Headers []byte
	Payload []byte
	// Slot is the row of the source's duplicate counter the event counts in.
	Slot int16
}

// onceOf is reg's one-statement path, nil when it has none.
func (reg Registration) onceOf() onceReceiver {
	if reg.once == nil && reg.Once != nil {
		return onceFunc(reg.Once)
	}
	return reg.once
}

// onceFunc is a Go handler's one statement (Registration.Once).
type onceFunc func(ctx context.Context, pool *pgxpool.Pool, ev Event, c Claim) (int64, error)

func (f onceFunc) receiveOnce(ctx context.Context, pool *pgxpool.Pool, ev Event, headers []byte) (Result, bool) {
	row, err := f(ctx, pool, ev, Claim{Source: ev.Source, EventID: ev.ID, Headers: headers, Payload: ev.Payload, Slot: slot(ev.ID)})
	switch {
	case err != nil:
		return Result{}, false
	case row == 0:
		return Result{Outcome: OutcomeDuplicate}, true
	}
	return Result{Outcome: OutcomeProcessed}, true
}

// onceReceiver receives an event in one statement: the claim and the
// handler's effect in the statement's own transaction. ok is false when
// it could not tell (nothing was written, or, if the answer was lost, the
// event was recorded and the general path finds a duplicate): the general
// path then runs the event as for any handler, and records or answers
// what it finds.
type onceReceiver interface {
	receiveOnce(ctx context.Context, pool *pgxpool.Pool, ev Event, headers []byte) (res Result, ok bool)
}

// Registry maps handler names (switchyard.inbox_sources.handler) to Go
// handlers. It is built at start and only read afterwards.
type Registry map[string]Registration

// Source is one configured source, as Receiver uses it.
type Source struct {
	Name string
	// Verifier checks its signatures; nil, with Problem set, when the
	// source could not be set up.
	Verifier Verifier
	// Scheme is SchemeStandardWebhooks or SchemeStripe.
	Scheme  string
	Handler string
	Policy  Policy
	// Problem, when not nil, is why the source cannot receive: every
	// request to it fails with ErrMisconfigured.
	Problem error
	// Builtin, when not nil, is the built-in handler (HandlerForward,
	// HandlerSQL) the source's row configures; nil: Handler names a Go
	// handler of ReceiverConfig.Handlers.
	Builtin *Registration
}

// registration is the handler a source runs, false when there is none.
func (r *Receiver) registration(s Source) (Registration, bool) {
	if s.Builtin != nil {
		return *s.Builtin, true
	}
	reg, ok := r.cfg.Handlers[s.Handler]
	return reg, ok
}

// ReceiverConfig configures NewReceiver.
type ReceiverConfig struct {
	Pool *pgxpool.Pool
	// Sources are the sources to start with; Load and Watch replace them
	// with switchyard.inbox_sources.
	Sources  []Source
	Handlers Registry
	// Getenv reads the signing secrets that inbox_sources rows name
	// (secret_refs), for Load and Watch; nil: every secret is empty.
	Getenv func(string) string
	// ReloadInterval is how often Watch rereads switchyard.inbox_sources;
	// 0: DefaultReloadInterval.
	ReloadInterval time.Duration
	// Reloaded, when set, is called after Load replaced the sources with
	// ones that differ from before. It must not block.
	Reloaded func()
	// Logger reports misconfigured sources and failed reloads; nil:
	// discard.
	Logger *slog.Logger
	// Metrics; nil: not recorded.
	Metrics *Metrics
	// Now is the clock for signature timestamps; nil: time.Now.
	Now func() time.Time
	// Changed, when set, is called after a handler's failure was recorded,
	// which appends to the change feed (switchyard.changes). It must not
	// block; a coalescing notifier's Poke (internal/changefeed) fits.
	Changed func()
}

// Receiver turns signed requests of configured sources into Receive calls.
// It is safe for concurrent use; its sources may be replaced (Load, Watch)
// while requests are accepted.
type Receiver struct {
	cfg     ReceiverConfig
	sources atomic.Pointer[map[string]Source]
	// rows are the inbox_sources rows the sources were last loaded
	// from; guarded by loadMu, which serialises Load.
	rows   map[string]queries.SwitchyardInboxSource
	loadMu sync.Mutex
}

// NewReceiver returns a Receiver for cfg's sources. A source naming an
// unregistered handler gets a Problem.
func NewReceiver(cfg ReceiverConfig) *Receiver {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	if cfg.Reloaded == nil {
		cfg.Reloaded = func() {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{cfg: cfg}
	r.setSources(cfg.Sources)
	return r
}

// setSources replaces the sources, checking that each names a registered
// handler and has a verifier.
func (r *Receiver) setSources(list []Source) {
	sources := make(map[string]Source, len(list))
	for _, s := range list {
		if _, ok := r.registration(s); !ok && s.Problem == nil {
			s.Problem = fmt.Errorf("no handler named %q is registered", s.Handler)
		}
		if s.Verifier == nil && s.Problem == nil {
			s.Problem = errors.New("no signature verifier")
		}
		sources[s.Name] = s
		r.cfg.Metrics.init(s.Name)
	}
	r.sources.Store(&sources)
}

// Accept verifies a request to source on its raw body, parses it and
// receives the event. headers are the request's; the ones worth keeping
// are stored with the event.
func (r *Receiver) Accept(ctx context.Context, source string, headers http.Header, body []byte) (Result, error) {
	src, ok := (*r.sources.Load())[source]
	if !ok {
		return Result{}, fmt.Errorf("%w: %q", ErrUnknownSource, source)
	}
	if src.Problem != nil {
		return Result{}, fmt.Errorf("%w: %s: %w", ErrMisconfigured, source, src.Problem)
	}
	id, err := src.Verifier.Verify(headers, body, r.cfg.Now())
	if err != nil {
		r.signatureRefused(ctx, source, err)
		return Result{}, err
	}
	reg, _ := r.registration(src)
	ev, err := parseEvent(src, reg, id, headers, body)
	if err != nil {
		return Result{}, err
	}
	res, err := receive(ctx, r.cfg.Pool, ev, reg)
	if err == nil || errors.Is(err, ErrHandler) {
		r.cfg.Metrics.count(source, res)
	}
	if errors.Is(err, ErrHandler) {
		r.cfg.Changed()
	}
	return res, err
}

// signatureRefused logs and counts why a signature was refused: the
// operator needs the reason (a clock off by how much, a secret not
// rotated yet), the sender must not get it (it would help a forger).
func (r *Receiver) signatureRefused(ctx context.Context, source string, err error) {
	reason, attrs := ReasonBadFormat, []slog.Attr{slog.String("source", source)}
	var serr *SignatureError
	if errors.As(err, &serr) {
		reason = serr.Reason
	}
	attrs = append(attrs, slog.String("reason", string(reason)))
	if reason == ReasonTimestampSkew {
		attrs = append(attrs, slog.Float64("skew_seconds", serr.Skew.Seconds()))
	}
	attrs = append(attrs, slog.Any("error", err))
	r.cfg.Metrics.signatureFailures.WithLabelValues(source, string(reason)).Inc()
	r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "inbox signature refused", attrs...)
}

// parseEvent builds the event of a verified request.
func parseEvent(src Source, reg Registration, id string, headers http.Header, body []byte) (Event, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(body) {
		return Event{}, fmt.Errorf("%w: body is not a JSON object", ErrMalformed)
	}
	if id == "" { // Stripe: the event id is the payload's "id"
		var withID struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(body, &withID) // valid JSON: cannot fail
		if id, _ = withID.ID.(string); id == "" {
			return Event{}, fmt.Errorf("%w: no string \"id\" in the payload", ErrMalformed)
		}
	}
	ev := Event{Source: src.Name, ID: id, Headers: keptHeaders(headers), Payload: body, Policy: src.Policy, payloadValid: true}
	if reg.Entity != nil {
		key, version, err := reg.Entity(body)
		if err != nil {
			return Event{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		if key != "" && version < 1 {
			return Event{}, fmt.Errorf("%w: entity %q without a version of 1 or more", ErrMalformed, key)
		}
		ev.EntityKey, ev.EntityVersion = key, version
	}
	return ev, nil
}

// keptHeaders are the request headers stored with an event: the first
// value of each, without credentials.
func keptHeaders(headers http.Header) map[string]string {
	kept := make(map[string]string, len(headers))
	for name, values := range headers {
		switch strings.ToLower(name) {
		case "authorization", "cookie", "proxy-authorization":
			continue
		}
		if len(values) > 0 {
			kept[strings.ToLower(name)] = values[0]
		}
	}
	return kept
}

// HandlerOf names the handler that source runs ("forward", "sql", a Go
// handler's name), or "" when the source is not configured.
func (r *Receiver) HandlerOf(source string) string {
	return (*r.sources.Load())[source].Handler
}
