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

// params is f as the queries take it (switchyard.replay_candidates'
// filter), over every id; ReplayJobListCandidates takes the same.
func (f Filter) params() (queries.ReplayJobCountParams, error) {
	topic, err := msgfilter.ParseName(f.Topic)
	if err != nil {
		return queries.ReplayJobCountParams{}, fmt.Errorf("bulkreplay: topic %q: %w", f.Topic, err)
	}
	dest, err := msgfilter.ParseName(f.Destination)
	if err != nil {
		return queries.ReplayJobCountParams{}, fmt.Errorf("bulkreplay: destination %q: %w", f.Destination, err)
	}
	return queries.ReplayJobCountParams{
		Fingerprint: opt(f.Fingerprint),
		Destination: dest.Exact, DestinationPrefix: dest.Prefix, DestinationUpper: dest.Upper,
		Topic: topic.Exact, TopicPrefix: topic.Prefix, TopicUpper: topic.Upper,
		AggregateType: opt(f.AggregateType), AggregateID: opt(f.AggregateID), ErrorText: msgfilter.ErrorPattern(f.ErrorContains),
		DeadFrom: optTime(f.DeadFrom), DeadTo: optTime(f.DeadTo), CreatedFrom: optTime(f.CreatedFrom), CreatedTo: optTime(f.CreatedTo),
		BlockedHeads: f.BlockedHeads, CeilingID: msgfilter.NoCeiling,
	}, nil
}

// idRange is the ids of f's created window (msgfilter.IDRange, as the
// message list bounds the same window).
func (f Filter) idRange(ctx context.Context, q *queries.Queries) (floor, ceiling int64, err error) {
	floor, ceiling, err = msgfilter.IDRange(ctx, q, optTime(f.CreatedFrom), optTime(f.CreatedTo))
	if err != nil {
		return 0, 0, fmt.Errorf("bulkreplay: %w", err)
	}
	return floor, ceiling, nil
}

// MaxCounted is the most dead messages Estimate counts: where the planner
// expects more, it answers with the planner's estimate instead.
const MaxCounted = 10_000

// MaxEstimate is where a bulk repair's estimate stops counting open
// findings (RepairJobEstimate).
const MaxEstimate = 100_000

// Matches is how many dead messages a filter matches, as Estimate found.
type Matches struct {
	N int64
	// AtLeast: counting stopped at MaxCounted; N is MaxCounted.
	AtLeast bool
	// About: N is the planner's estimate, above MaxCounted, not a count.
	About bool
}

// Estimate says how many dead messages f matches, never replayed ones,
// without reading more than MaxCounted of them: it asks the planner first
// (ReplayJobEstimate, which reads no message) and counts (ReplayJobCount)
// only when the planner expects at most MaxCounted; above that it
// answers with the planner's number. So a filter that matches most dead
// messages (a common topic prefix) costs a plan, not a read of every dead
// message (EXPLAIN.md). A created window is bounded by ids first, as the
// job's batches are.
func Estimate(ctx context.Context, db queries.DBTX, f Filter) (Matches, error) {
	p, err := f.params()
	if err != nil {
		return Matches{}, err
	}
	q := queries.New(db)
	if p.FloorID, p.CeilingID, err = f.idRange(ctx, q); err != nil {
		return Matches{}, err
	}
	planned, err := q.ReplayJobEstimate(ctx, queries.ReplayJobEstimateParams{
		Fingerprint: p.Fingerprint, Destination: p.Destination, DestinationPrefix: p.DestinationPrefix,
		DestinationUpper: p.DestinationUpper, Topic: p.Topic, TopicPrefix: p.TopicPrefix, TopicUpper: p.TopicUpper,
		AggregateType: p.AggregateType, AggregateID: p.AggregateID, ErrorText: p.ErrorText,
		DeadFrom: p.DeadFrom, DeadTo: p.DeadTo, CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo,
		BlockedHeads: p.BlockedHeads, FloorID: p.FloorID, CeilingID: p.CeilingID,
	})
	if err != nil {
		return Matches{}, fmt.Errorf("bulkreplay: plan the estimate: %w", err)
	}
	if planned > MaxCounted {
		return Matches{N: planned, About: true}, nil
	}
	p.MaxRows = MaxCounted
	n, err := q.ReplayJobCount(ctx, p)
	if err != nil {
		return Matches{}, fmt.Errorf("bulkreplay: estimate: %w", err)
	}
	return Matches{N: n, AtLeast: n >= MaxCounted}, nil
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
	// Estimate is the count of matching messages when the job starts
	// (Matches.N), shown beside the progress: the caller counts it
	// (Estimate) in the job's transaction, never takes it from a client.
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
// it). A job with a created window starts at the window's first id and
// stops at its last (msgfilter.IDRange), so its batches do not walk the
// dead messages outside it. A job already running for the same filter is
// returned with ErrAlreadyRunning.
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
	floor, ceiling, err := s.Filter.idRange(ctx, q)
	if err != nil {
		return Job{}, err
	}
	job, err := q.ReplayJobCreate(ctx, queries.ReplayJobCreateParams{
		Filter: filter, FilterKey: key, Mode: string(s.Mode), Actor: s.Actor, Reason: s.Reason,
		RatePerSec: int32(s.RatePerSecond), Estimate: s.Estimate, CursorID: max(floor-1, 0), CeilingID: ceiling,
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
