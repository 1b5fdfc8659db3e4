// Package fakeremote is an in-process external system for reconciliation:
// an HTTP server speaking the contract of docs/reconcile.md over entities
// held in memory, with knobs to drop, alter and add entities, to go down,
// to answer under a caller's lock, and to count the calls it gets per
// second. Tests, the demo and the
// benchmark use it; it is not for production.
package fakeremote

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// lookupRequest and entity are the wire contract of docs/reconcile.md,
// spelled out here on their own so that the fake checks the contract
// rather than sharing the client's types.
type lookupRequest struct {
	Keys  []string `json:"keys"`
	Range *Range   `json:"range"`
}

// Range is a lookup's key range, (After, Through]; nil ends are open.
type Range struct {
	After   *string `json:"after"`
	Through *string `json:"through"`
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
	entities *store        // guarded by mu
	down     bool          // guarded by mu
	calls    int64         // guarded by mu
	perSec   map[int64]int // calls per unix second; guarded by mu
	onCall   func(n int64) // guarded by mu
	hold     sync.Locker   // guarded by mu; nil: none
}

// New starts a provider; Close stops it.
func New() *Provider {
	p := &Provider{entities: newStore(), perSec: map[int64]int{}}
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
	raw, kn := encode(key, fields)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entities.put(key, raw, kn)
}

// PutJSON adds or replaces the entity key with fields given as the JSON
// object the provider is to answer (not checked: a test double): what
// Put does without encoding a map, for tests that seed many entities.
func (p *Provider) PutJSON(key string, fields json.RawMessage) {
	raw := append(make([]byte, 0, len(key)+len(fields)+24), `{"key":`...)
	raw = appendKey(raw, key)
	kn := len(raw) - len(`{"key":`)
	raw = append(append(append(raw, `,"fields":`...), fields...), '}')
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entities.put(key, raw, kn)
}

// encode is an entity as the provider answers it, and the length of its
// key's JSON string.
func encode(key string, fields map[string]any) ([]byte, int) {
	raw, err := json.Marshal(entity{Key: key, Fields: fields})
	if err != nil {
		panic("fakeremote: an entity's fields must encode as JSON: " + err.Error())
	}
	return raw, len(appendKey(nil, key))
}

// appendKey appends key as a JSON string, as encoding/json writes it.
func appendKey(b []byte, key string) []byte {
	if _, ok := intKey(key); ok {
		return append(append(append(b, '"'), key...), '"') // digits need no escaping
	}
	q, _ := json.Marshal(key) // a string always encodes
	return append(b, q...)
}

// Drop removes the entity key (drift: missing remotely).
func (p *Provider) Drop(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entities.drop(key)
}

// Alter sets one field of the entity key (drift: a mismatch).
func (p *Provider) Alter(key, field string, value any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp, ok := p.entities.get(key)
	if !ok {
		return
	}
	var e entity
	d := json.NewDecoder(bytes.NewReader(p.entities.bytes(sp)))
	d.UseNumber()
	if err := d.Decode(&e); err != nil || e.Fields == nil {
		return
	}
	e.Fields[field] = value
	raw, kn := encode(key, e.Fields)
	p.entities.put(key, raw, kn)
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

// Hold makes the provider answer every lookup while holding l (nil:
// none). A program that changes the entities in step with transactions
// of its own locks l around each transaction and its change, so that no
// answer shows an entity whose transaction is still in flight, nor lacks
// one whose transaction committed. l is taken before the provider's own
// lock: its holder may call the provider's methods.
func (p *Provider) Hold(l sync.Locker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = l
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
	hold := p.count()
	var req lookupRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad lookup: "+err.Error(), http.StatusBadRequest)
		return
	}
	out, ok := p.answer(req, hold)
	if !ok {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// count counts a call, calls the OnCall hook and returns the lock to
// answer it under (Hold).
func (p *Provider) count() (hold sync.Locker) {
	p.mu.Lock()
	p.calls++
	p.perSec[time.Now().Unix()]++
	n, hook, hold := p.calls, p.onCall, p.hold
	p.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return hold
}

// answer is the encoded answer to req, under hold (if any) and p.mu; ok
// is false while the provider is down.
func (p *Provider) answer(req lookupRequest, hold sync.Locker) (out []byte, ok bool) {
	out = append(make([]byte, 0, 64*len(req.Keys)+32), `{"entities":[`...)
	first := true
	ok = p.each(req, hold, func(sp span) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, p.entities.bytes(sp)...)
	})
	return append(out, "]}\n"...), ok
}

// each calls fn with every entity req asks for, once each, under hold (if
// any) and p.mu; ok is false (and fn not called) while the provider is
// down.
func (p *Provider) each(req lookupRequest, hold sync.Locker, fn func(span)) (ok bool) {
	if hold != nil {
		hold.Lock()
		defer hold.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	seen := make(map[uint64]bool, len(req.Keys)) // by arena offset: one per entity
	add := func(sp span) {
		if !seen[sp.off] {
			seen[sp.off] = true
			fn(sp)
		}
	}
	for _, k := range req.Keys {
		if sp, ok := p.entities.get(k); ok {
			add(sp)
		}
	}
	if req.Range != nil {
		p.entities.inRange(req.Range.After, req.Range.Through, add)
	}
	return true
}

// ErrDown is Lookup's error while the provider is down.
var ErrDown = errors.New("fakeremote: the provider is down")

// Found is one entity Lookup found: its key and its fields as the JSON
// object an HTTP answer carries (nil: none).
type Found struct {
	Key    string
	Fields json.RawMessage
}

// Lookup asks in process what a POST asks (keys and, with rng, every
// entity in it): the same entities in the same order, counted, hooked and
// held like a POST, without HTTP or JSON. Tests that look up many keys
// under the race detector use it; the HTTP contract is the POST's.
func (p *Provider) Lookup(keys []string, rng *Range) ([]Found, error) {
	hold := p.count()
	out := make([]Found, 0, len(keys))
	ok := p.each(lookupRequest{Keys: keys, Range: rng}, hold, func(sp span) {
		out = append(out, p.entities.found(sp))
	})
	if !ok {
		return nil, ErrDown
	}
	return out, nil
}
