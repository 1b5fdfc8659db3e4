package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// The run's inbox source: events for a handful of customers, applied by a
// SQL function of the business schema in the transaction that records
// each event (the inbox's built-in "sql" handler). The function appends
// one effect row per call, so an event applied twice shows twice, and
// keeps each customer's newest version (events arrive out of order).
const (
	inboxSource    = "chaos-inbox"
	inboxSecretEnv = "CHAOS_INBOX_SECRET"
	inboxSecret    = "whsec_Y2hhb3MtaW5ib3gtc2VjcmV0LWZvci10ZXN0cw=="
	inboxEntities  = 10
)

// inboxSchema is the business side of the inbox: the effects and the
// customers' state, and the function the source names.
const inboxSchema = `
CREATE TABLE IF NOT EXISTS chaos_inbox_effects (
    event_id text NOT NULL,
    entity text NOT NULL,
    version bigint NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS chaos_inbox_state (
    entity text PRIMARY KEY,
    version bigint NOT NULL
);
CREATE OR REPLACE FUNCTION public.chaos_inbox_apply(event jsonb, headers jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO chaos_inbox_effects (event_id, entity, version)
    VALUES (event->>'id', event->>'entity', (event->>'version')::bigint);
    INSERT INTO chaos_inbox_state AS s (entity, version)
    VALUES (event->>'entity', (event->>'version')::bigint)
    ON CONFLICT (entity) DO UPDATE SET version = excluded.version WHERE s.version < excluded.version;
$$;
INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function, max_attempts)
VALUES ('` + inboxSource + `', 'standard-webhooks', ARRAY['` + inboxSecretEnv + `'], 'sql', 'public.chaos_inbox_apply', 100000)
ON CONFLICT (name) DO NOTHING;
`

// inboxEvent is one event the sender made.
type inboxEvent struct {
	id      string
	entity  string
	version int64
	body    []byte
}

// inboxSender sends signed events to the console instances: in small
// batches shuffled out of order, each to a random instance, and a third
// of them a second time to the other instance at once (a duplicate racing
// the original). Every send is retried, with backoff and alternating
// between the instances, until one answers 200.
type inboxSender struct {
	urls   []string
	client *http.Client
	wg     sync.WaitGroup
	// slots bounds the requests in flight (sendConcurrency), as a real
	// sender's workers do: the instances refuse a client address past
	// 128 connections, and every client of the run shares loopback's.
	slots chan struct{}

	mu    sync.Mutex
	sent  map[string]inboxEvent // guarded by mu; every event made
	acked map[string]bool       // guarded by mu; answered 200 at least once
	dups  int                   // guarded by mu; duplicate sends
}

func newInboxSender(urls []string) *inboxSender {
	return &inboxSender{urls: urls, client: &http.Client{Timeout: 10 * time.Second}, slots: make(chan struct{}, sendConcurrency),
		sent: map[string]inboxEvent{}, acked: map[string]bool{}}
}

// run makes a batch of 1–4 events every interval until ctx ends; the
// sends go on in send (which ends when give ends).
func (s *inboxSender) run(ctx, give context.Context, seed uint64, interval time.Duration) {
	rnd := rand.New(rand.NewPCG(seed, 6))
	versions := make([]int64, inboxEntities)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		batch := make([]inboxEvent, 1+rnd.IntN(4))
		for i := range batch {
			e := rnd.IntN(inboxEntities)
			versions[e]++
			n++
			ev := inboxEvent{id: fmt.Sprintf("ev-%d", n), entity: fmt.Sprintf("customer-%d", e), version: versions[e]}
			ev.body = fmt.Appendf(nil, `{"id": %q, "entity": %q, "version": %d}`, ev.id, ev.entity, ev.version)
			batch[i] = ev
		}
		rnd.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, ev := range batch {
			first := rnd.IntN(len(s.urls))
			dup := rnd.IntN(3) == 0
			s.mu.Lock()
			s.sent[ev.id] = ev
			if dup {
				s.dups++
			}
			s.mu.Unlock()
			s.wg.Go(func() { s.send(give, s.urls[first], ev) })
			if dup {
				s.wg.Go(func() { s.send(give, s.urls[(first+1)%len(s.urls)], ev) })
			}
		}
	}
}

// send posts ev until an instance answers 200 or ctx ends, signing each
// attempt with the time it is made. It starts at base and tries the
// other instance on each retry, and its retries back off (sendRetry), as
// a webhook sender does: a sender that retried every event at a fixed
// pace while the instances could not reach the database piled up
// thousands of requests a second on them (a run at load average 40 left
// 2,121 events unanswered and the instances' pools starved by requests
// waiting for connections, so that their live views lagged too).
func (s *inboxSender) send(ctx context.Context, base string, ev inboxEvent) {
	at := max(slices.Index(s.urls, base), 0)
	for attempt := 1; ctx.Err() == nil; attempt++ {
		if s.post(ctx, s.urls[(at+attempt-1)%len(s.urls)], ev) {
			s.mu.Lock()
			s.acked[ev.id] = true
			s.mu.Unlock()
			return
		}
		pause(ctx, sendRetry(attempt, rand.Float64()))
	}
}

// The inbox sender's retry pace: doubling from sendRetryBase up to
// sendRetryCap, each pause drawn from half to all of its bound.
const (
	sendRetryBase = 200 * time.Millisecond
	sendRetryCap  = 5 * time.Second
)

// sendRetry is the pause after the given failed attempt (1: the first),
// with r in [0, 1) drawing the jitter.
func sendRetry(attempt int, r float64) time.Duration {
	bound := sendRetryCap
	if attempt < 8 {
		bound = min(sendRetryBase<<(attempt-1), sendRetryCap)
	}
	return bound/2 + time.Duration(r*float64(bound/2))
}

// sendConcurrency is how many requests the inbox sender has in flight at
// most.
const sendConcurrency = 32

// post sends ev to base once; true when it answered 200.
func (s *inboxSender) post(ctx context.Context, base string, ev inboxEvent) bool {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return false
	}
	now := time.Now()
	sig, err := webhook.Sign(inboxSecret, ev.id, now, ev.body)
	if err != nil {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/inbox/"+inboxSource, bytes.NewReader(ev.body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", ev.id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// inboxVerdict is the inbox check's result.
type inboxVerdict struct {
	Events     int `json:"events"`
	Sends      int `json:"duplicate_sends"`
	Acked      int `json:"acknowledged"`
	Unanswered int `json:"unanswered"`
	// DoubleEffects: events applied more than once. Fails the run.
	DoubleEffects int `json:"double_effects"`
	// Lost: events answered 200 and never applied. Fails the run.
	Lost int `json:"lost"`
	// Unexpected: effects of events never sent. Fails the run.
	Unexpected int `json:"unexpected"`
	// StateMismatches: customers whose state is not their newest applied
	// version. Fails the run.
	StateMismatches int `json:"state_mismatches"`
}

func (v inboxVerdict) failures() []string {
	var out []string
	for _, f := range []struct {
		name string
		n    int
	}{{"inbox_double_effects", v.DoubleEffects}, {"inbox_lost", v.Lost}, {"inbox_unexpected", v.Unexpected},
		{"inbox_state_mismatches", v.StateMismatches}} {
		if f.n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", f.name, f.n))
		}
	}
	return out
}

// check compares the effects with what was sent and acknowledged: each
// acknowledged event took effect exactly once, nothing else took effect,
// and each customer holds the newest version applied.
func (s *inboxSender) check(ctx context.Context, pool *pgxpool.Pool) (inboxVerdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := inboxVerdict{Events: len(s.sent), Sends: s.dups, Acked: len(s.acked)}
	rows, err := pool.Query(ctx, `SELECT event_id, entity, version, count(*) OVER (PARTITION BY event_id) FROM chaos_inbox_effects`)
	if err != nil {
		return v, fmt.Errorf("read the inbox effects: %w", err)
	}
	effects := map[string]int{}
	newest := map[string]int64{}
	for rows.Next() {
		var id, entity string
		var version, n int64
		if err := rows.Scan(&id, &entity, &version, &n); err != nil {
			return v, fmt.Errorf("read the inbox effects: %w", err)
		}
		effects[id] = int(n)
		newest[entity] = max(newest[entity], version)
	}
	if err := rows.Err(); err != nil {
		return v, fmt.Errorf("read the inbox effects: %w", err)
	}
	for id, n := range effects {
		if _, ok := s.sent[id]; !ok {
			v.Unexpected++
		}
		if n > 1 {
			v.DoubleEffects++
		}
	}
	for id := range s.sent {
		switch {
		case s.acked[id] && effects[id] == 0:
			v.Lost++
		case !s.acked[id]:
			v.Unanswered++
		}
	}
	state, err := pool.Query(ctx, `SELECT entity, version FROM chaos_inbox_state`)
	if err != nil {
		return v, fmt.Errorf("read the customers' state: %w", err)
	}
	got, err := pgx.CollectRows(state, func(r pgx.CollectableRow) ([2]any, error) {
		var e string
		var ver int64
		err := r.Scan(&e, &ver)
		return [2]any{e, ver}, err
	})
	if err != nil {
		return v, fmt.Errorf("read the customers' state: %w", err)
	}
	for _, g := range got {
		if newest[g[0].(string)] != g[1].(int64) {
			v.StateMismatches++
		}
	}
	if len(got) != len(newest) {
		v.StateMismatches += abs(len(newest) - len(got))
	}
	return v, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
