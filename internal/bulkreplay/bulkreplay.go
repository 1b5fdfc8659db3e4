// Package bulkreplay replays every dead message that matches a filter (a
// dead-letter group, or any message filter) as a background job: estimate,
// confirm (Start), progress, a rate limit, cancel, and resume after a
// restart, with one running job per filter. Each batch of messages is
// replayed through outbox.ReplayBatch, which runs the statements of a single
// replay (outbox.Replay) set-based, so every rule of a single replay holds
// (one replay in flight per message, one row per request). Schema and the reasons for its shape:
// migrations/00010_replays.sql.
//
// Any number of Runners may run against one database: a job is leased by one
// at a time, and a Runner that dies leaves a lease that expires; the next
// Runner resumes from the job's cursor. A batch that was replayed but whose
// progress was not recorded is replayed again with the same request ids
// (derived from the job and the message), which creates nothing twice.
package bulkreplay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// Filter selects dead messages. Empty fields match anything; a zero Filter
// matches every dead message that was never replayed. Topic, Destination,
// ErrorContains and CreatedFrom/CreatedTo mean what the message list's
// filters of the same names mean (internal/msgfilter), so a filtered list
// replays exactly what it shows: a Topic or Destination ending in "." or
// "*" is a prefix; ErrorContains is a case-insensitive substring of the
// error's first msgfilter.ErrorSearchChars characters.
type Filter struct {
	Fingerprint   string `json:"fingerprint,omitempty"`
	Destination   string `json:"destination,omitempty"`
	Topic         string `json:"topic,omitempty"`
	AggregateType string `json:"aggregate_type,omitempty"`
	AggregateID   string `json:"aggregate_id,omitempty"`
	ErrorContains string `json:"error_contains,omitempty"`
	// DeadFrom and DeadTo bound when the message died (finished_at):
	// DeadFrom <= finished_at < DeadTo.
	DeadFrom time.Time `json:"dead_from,omitzero"`
	DeadTo   time.Time `json:"dead_to,omitzero"`
	// CreatedFrom and CreatedTo bound when the message was enqueued
	// (created_at), the message list's from/to: CreatedFrom <= created_at
	// < CreatedTo.
	CreatedFrom time.Time `json:"created_from,omitzero"`
	CreatedTo   time.Time `json:"created_to,omitzero"`
	// BlockedHeads keeps to the dead heads that block their aggregates
	// (the blocked aggregates page's "replay the heads of all listed").
	BlockedHeads bool `json:"blocked_heads,omitempty"`
}

// key is the filter's canonical text: one running job per key. The JSON
// encoding of a struct is canonical (fields in declaration order), times
// are normalised to UTC and names to msgfilter.CanonicalName (`order.`
// and `order.*` are one filter).
func (f Filter) key() (string, []byte) {
	for _, t := range []*time.Time{&f.DeadFrom, &f.DeadTo, &f.CreatedFrom, &f.CreatedTo} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	f.Topic, f.Destination = msgfilter.CanonicalName(f.Topic), msgfilter.CanonicalName(f.Destination)
	b, _ := json.Marshal(f) // a struct of strings and times always marshals
	return string(b), b
}

// params is f as the queries take it (ReplayJobEstimate's parameters; the
// candidates query has the same filter fields).
func (f Filter) params() (queries.ReplayJobEstimateParams, error) {
	topic, err := msgfilter.ParseName(f.Topic)
	if err != nil {
		return queries.ReplayJobEstimateParams{}, fmt.Errorf("bulkreplay: topic %q: %w", f.Topic, err)
	}
	dest, err := msgfilter.ParseName(f.Destination)
	if err != nil {
		return queries.ReplayJobEstimateParams{}, fmt.Errorf("bulkreplay: destination %q: %w", f.Destination, err)
	}
	return queries.ReplayJobEstimateParams{
		Fingerprint: opt(f.Fingerprint),
		Destination: dest.Exact, DestinationPrefix: dest.Prefix, DestinationUpper: dest.Upper,
		Topic: topic.Exact, TopicPrefix: topic.Prefix, TopicUpper: topic.Upper,
		AggregateType: opt(f.AggregateType), AggregateID: opt(f.AggregateID), ErrorText: msgfilter.ErrorPattern(f.ErrorContains),
		DeadFrom: optTime(f.DeadFrom), DeadTo: optTime(f.DeadTo), CreatedFrom: optTime(f.CreatedFrom), CreatedTo: optTime(f.CreatedTo),
		BlockedHeads: f.BlockedHeads,
	}, nil
}

// MaxEstimate is where Estimate stops counting.
const MaxEstimate = 100_000

// Estimate counts the dead messages f matches, never replayed ones, up to
// MaxEstimate (a result of MaxEstimate means "at least that many").
func Estimate(ctx context.Context, db queries.DBTX, f Filter) (int64, error) {
	p, err := f.params()
	if err != nil {
		return 0, err
	}
	p.Cap = MaxEstimate
	n, err := queries.New(db).ReplayJobEstimate(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("bulkreplay: estimate: %w", err)
	}
	return n, nil
}

// Spec describes a job to start.
type Spec struct {
	Filter Filter
	Mode   outbox.ReplayMode
	Actor  string
	Reason string
	// RatePerSecond bounds the replays per second: 1 to MaxRatePerSecond,
	// 0 for the default, 50.
	RatePerSecond int
	// Estimate is the count of matching messages when the job starts,
	// shown beside the progress: the caller counts it (Estimate) in the
	// job's transaction, never takes it from a client.
	Estimate int64
}

// Errors of Start.
var (
	ErrAlreadyRunning = errors.New("bulkreplay: a job for this filter is already running")
	ErrReasonRequired = errors.New("bulkreplay: a replay with new idempotency keys needs a reason")
	ErrInvalidRate    = fmt.Errorf("bulkreplay: the rate must be from 1 to %d replays per second", MaxRatePerSecond)
)

// MaxRatePerSecond bounds a job's rate: a rate limit that does not limit
// would not protect the destinations.
const MaxRatePerSecond = 10000

// Job is a bulk replay job as stored.
type Job = queries.SwitchyardReplayJob

// Start creates a running job in tx (the caller's audit row commits with
// it). A job already running for the same filter is returned with
// ErrAlreadyRunning.
func Start(ctx context.Context, tx pgx.Tx, s Spec) (Job, error) {
	if s.Mode != outbox.Redeliver && s.Mode != outbox.Reapply {
		return Job{}, fmt.Errorf("bulkreplay: mode %q: want redeliver or reapply", s.Mode)
	}
	if s.Mode == outbox.Reapply && s.Reason == "" {
		return Job{}, ErrReasonRequired
	}
	switch {
	case s.RatePerSecond == 0:
		s.RatePerSecond = 50
	case s.RatePerSecond < 0 || s.RatePerSecond > MaxRatePerSecond:
		return Job{}, ErrInvalidRate
	}
	key, filter := s.Filter.key()
	q := queries.New(tx)
	job, err := q.ReplayJobCreate(ctx, queries.ReplayJobCreateParams{
		Filter: filter, FilterKey: key, Mode: string(s.Mode), Actor: s.Actor, Reason: s.Reason,
		RatePerSec: int32(s.RatePerSecond), Estimate: s.Estimate,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		running, err := q.ReplayJobGetRunning(ctx, key)
		if err != nil {
			return Job{}, fmt.Errorf("bulkreplay: find the running job: %w", err)
		}
		return running, ErrAlreadyRunning
	}
	if err != nil {
		return Job{}, fmt.Errorf("bulkreplay: start: %w", err)
	}
	return job, nil
}

// Cancel stops a running job in tx; what it replayed stays replayed. It
// reports whether the job was running.
func Cancel(ctx context.Context, tx pgx.Tx, id uuid.UUID) (bool, error) {
	n, err := queries.New(tx).ReplayJobCancel(ctx, id)
	if err != nil {
		return false, fmt.Errorf("bulkreplay: cancel: %w", err)
	}
	return n > 0, nil
}

// Get returns a job.
func Get(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) (Job, error) {
	job, err := queries.New(pool).ReplayJobGet(ctx, id)
	if err != nil {
		return Job{}, fmt.Errorf("bulkreplay: get %s: %w", id, err)
	}
	return job, nil
}

// requestID is the replay request id of message id within job: the same on
// every run of the batch, so a repeated batch creates nothing twice.
func requestID(job uuid.UUID, message int64) uuid.UUID {
	return uuid.NewSHA1(job, fmt.Appendf(nil, "%d", message))
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
