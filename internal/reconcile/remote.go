package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// maxResponseBytes bounds a remote's answer to one batch.
const maxResponseBytes = 64 << 20

// HTTPRemote speaks the contract of docs/reconcile.md: POST the request as
// JSON to the URL, get back {"entities": [...]}.
type HTTPRemote struct {
	client *http.Client
	url    string
}

// NewHTTPRemote returns the remote at url; client nil: http.DefaultClient.
func NewHTTPRemote(client *http.Client, url string) *HTTPRemote {
	if client == nil {
		client = http.DefaultClient
	}
	return &HTTPRemote{client: client, url: url}
}

// errPermanent marks a remote error that a retry cannot cure (a 4xx).
var errPermanent = errors.New("reconcile: remote refused the request")

// Lookup implements Remote.
func (r *HTTPRemote) Lookup(ctx context.Context, req LookupRequest) ([]Entity, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("reconcile: encode lookup: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("reconcile: lookup request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("reconcile: lookup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("reconcile: lookup: HTTP %d", resp.StatusCode)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			err = fmt.Errorf("%w: %w", errPermanent, err)
		}
		return nil, err
	}
	// Fields stay JSON text: classify compares them as bytes and decodes
	// only those that differ.
	var out struct {
		Entities []struct {
			Key     string          `json:"key"`
			Version string          `json:"version"`
			Hash    string          `json:"hash"`
			Fields  json.RawMessage `json:"fields"`
		} `json:"entities"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&out); err != nil {
		return nil, fmt.Errorf("reconcile: decode lookup answer: %w", err)
	}
	entities := make([]Entity, len(out.Entities))
	for i, e := range out.Entities {
		entities[i] = Entity{Key: e.Key, Version: e.Version, Hash: e.Hash}
		if len(e.Fields) > 0 && !bytes.Equal(e.Fields, []byte("null")) {
			entities[i].RawFields = e.Fields
		}
	}
	return entities, nil
}

// guardedRemote applies a check's rate limit, timeout and retries around
// any Remote: every attempt, retries included, takes a token.
type guardedRemote struct {
	remote   Remote
	limiter  *rate.Limiter
	timeout  time.Duration
	attempts int
	backoff  time.Duration
	calls    int64 // attempts made; guarded by the cycle (one goroutine)
}

func newGuardedRemote(r Remote, perSecond float64, timeout time.Duration, attempts int, backoff time.Duration) *guardedRemote {
	return &guardedRemote{remote: r, limiter: rate.NewLimiter(rate.Limit(perSecond), 1), timeout: timeout, attempts: attempts, backoff: backoff}
}

// lookup asks the remote, retrying transient failures with a doubling
// pause; the error is the last attempt's.
func (g *guardedRemote) lookup(ctx context.Context, req LookupRequest) ([]Entity, error) {
	var err error
	pause := g.backoff
	for attempt := range g.attempts {
		if attempt > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			pause *= 2
		}
		if werr := g.limiter.Wait(ctx); werr != nil {
			return nil, fmt.Errorf("reconcile: rate limit: %w", werr)
		}
		g.calls++
		var out []Entity
		out, err = g.call(ctx, req)
		if err == nil || errors.Is(err, errPermanent) || ctx.Err() != nil {
			return out, err
		}
	}
	return nil, err
}

func (g *guardedRemote) call(ctx context.Context, req LookupRequest) ([]Entity, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.remote.Lookup(ctx, req)
}
