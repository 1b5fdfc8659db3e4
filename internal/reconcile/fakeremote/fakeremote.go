// Package fakeremote is an in-process external system for reconciliation:
// an HTTP server speaking the contract of docs/reconcile.md over entities
// held in memory, with knobs to drop, alter and add entities, to go down,
// and to count the calls it gets per second. Tests, the demo and the
// benchmark use it; it is not for production.
package fakeremote

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"
)

// lookupRequest and entity are the wire contract of docs/reconcile.md,
// spelled out here on their own so that the fake checks the contract
// rather than sharing the client's types.
type lookupRequest struct {
	Keys  []string `json:"keys"`
	Range *struct {
		After   *string `json:"after"`
		Through *string `json:"through"`
	} `json:"range"`
}

type entity struct {
	Key    string         `json:"key"`
	Fields map[string]any `json:"fields,omitempty"`
}

// Provider is the fake external system. Its methods are safe for
// concurrent use.
type Provider struct {
	srv *httptest.Server

	mu       sync.Mutex
	entities map[string]map[string]any // guarded by mu
	sorted   []string                  // keys in key order; nil when stale; guarded by mu
	down     bool                      // guarded by mu
	calls    int64                     // guarded by mu
	perSec   map[int64]int             // calls per unix second; guarded by mu
	onCall   func(n int64)             // guarded by mu
}

// New starts a provider; Close stops it.
func New() *Provider {
	p := &Provider{entities: map[string]map[string]any{}, perSec: map[int64]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is where the provider answers lookups (POST).
func (p *Provider) URL() string { return p.srv.URL }

// Close stops the server.
func (p *Provider) Close() { p.srv.Close() }

// Put adds or replaces the entity key; fields nil: an entity without
// fields (a delivery receiver's message id).
func (p *Provider) Put(key string, fields map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.entities[key]; !ok {
		p.sorted = nil
	}
	p.entities[key] = fields
}

// Drop removes the entity key (drift: missing remotely).
func (p *Provider) Drop(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.entities, key)
	p.sorted = nil
}

// Alter sets one field of the entity key (drift: a mismatch).
func (p *Provider) Alter(key, field string, value any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.entities[key]; f != nil {
		f[field] = value
	}
}

// SetDown makes every lookup fail with 503 (true) or answer again.
func (p *Provider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// OnCall sets a function called with the running count before each call
// is answered (a test's signal; it may call SetDown).
func (p *Provider) OnCall(fn func(n int64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onCall = fn
}

// Calls is how many lookups the provider got.
func (p *Provider) Calls() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// MaxCallsPerSecond is the most lookups the provider got within one
// wall-clock second.
func (p *Provider) MaxCallsPerSecond() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := 0
	for _, n := range p.perSec {
		m = max(m, n)
	}
	return m
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a lookup", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	p.calls++
	p.perSec[time.Now().Unix()]++
	n, hook := p.calls, p.onCall
	p.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	var req lookupRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad lookup: "+err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	out := p.lookup(req)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"entities": out})
}

// lookup answers req; p.mu is held.
func (p *Provider) lookup(req lookupRequest) []entity {
	out := make([]entity, 0, len(req.Keys))
	seen := map[string]bool{}
	add := func(k string) {
		if f, ok := p.entities[k]; ok && !seen[k] {
			seen[k] = true
			out = append(out, entity{Key: k, Fields: f})
		}
	}
	for _, k := range req.Keys {
		add(k)
	}
	if req.Range != nil {
		keys := p.keys()
		i := 0
		if req.Range.After != nil {
			i, _ = slices.BinarySearchFunc(keys, *req.Range.After, compareKeys)
			if i < len(keys) && keys[i] == *req.Range.After {
				i++
			}
		}
		for ; i < len(keys) && (req.Range.Through == nil || compareKeys(keys[i], *req.Range.Through) <= 0); i++ {
			add(keys[i])
		}
	}
	return out
}

// keys returns the keys in key order, sorting when stale; p.mu is held.
func (p *Provider) keys() []string {
	if p.sorted == nil {
		p.sorted = make([]string, 0, len(p.entities))
		for k := range p.entities {
			p.sorted = append(p.sorted, k)
		}
		slices.SortFunc(p.sorted, compareKeys)
	}
	return p.sorted
}

// compareKeys orders keys as PostgreSQL orders an integer key column when
// both are integers, else by their bytes (a text key with COLLATE "C").
func compareKeys(a, b string) int {
	ai, aerr := strconv.ParseInt(a, 10, 64)
	bi, berr := strconv.ParseInt(b, 10, 64)
	if aerr == nil && berr == nil {
		return cmp.Compare(ai, bi)
	}
	return cmp.Compare(a, b)
}
