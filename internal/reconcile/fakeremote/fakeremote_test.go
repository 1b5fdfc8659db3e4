package fakeremote

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func lookup(t *testing.T, p *Provider, body string) (int, []string) {
	t.Helper()
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Post(p.URL(), "application/json", bytes.NewBufferString(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Entities []entity }
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	keys := []string{}
	for _, e := range out.Entities {
		keys = append(keys, e.Key)
	}
	return resp.StatusCode, keys
}

// The provider answers the keys it has and, for a range, every key in it
// in integer order; down, it answers 503; it counts every call.
func TestProvider(t *testing.T) {
	t.Parallel()
	p := New()
	defer p.Close()
	for _, k := range []string{"1", "2", "9", "10", "11"} {
		p.Put(k, map[string]any{"n": k})
	}
	p.Drop("2")
	code, keys := lookup(t, p, `{"keys": ["1", "2", "3"]}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"1"}, keys)
	_, keys = lookup(t, p, `{"keys": ["1"], "range": {"after": "1", "through": "10"}}`)
	require.Equal(t, []string{"1", "9", "10"}, keys, "9 < 10 as integers")
	_, keys = lookup(t, p, `{"keys": [], "range": {"after": "9"}}`)
	require.Equal(t, []string{"10", "11"}, keys)
	p.SetDown(true)
	code, _ = lookup(t, p, `{"keys": ["1"]}`)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, int64(4), p.Calls())
	// Four calls within a second or two of wall-clock time.
	require.GreaterOrEqual(t, p.MaxCallsPerSecond(), 2)
	require.LessOrEqual(t, p.MaxCallsPerSecond(), 4)
}

// Keys that are not integers are ordered by their bytes, after integers
// compare by value; an altered entity answers its new field.
func TestProviderMixedKeysAndAlter(t *testing.T) {
	t.Parallel()
	p := New()
	defer p.Close()
	for _, k := range []string{"b", "10", "2", "a", "007"} {
		p.Put(k, map[string]any{"n": 1})
	}
	_, keys := lookup(t, p, `{"keys": [], "range": {"after": "2"}}`)
	require.Equal(t, []string{"007", "10", "a", "b"}, keys, `"2" < "007" by bytes; 2 < 10 as integers`)
	_, keys = lookup(t, p, `{"keys": ["a", "a", "10"], "range": {"after": "a", "through": "b"}}`)
	require.Equal(t, []string{"a", "10", "b"}, keys, "each entity once")
	p.Drop("a")
	p.Alter("10", "n", 2)
	resp, err := http.Post(p.URL(), "application/json", bytes.NewBufferString(`{"keys": ["10", "a"]}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Entities []entity }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Entities, 1)
	require.Equal(t, float64(2), out.Entities[0].Fields["n"])
}

// signalLocker tells wanted each time its Lock is called, before it
// locks.
type signalLocker struct {
	sync.Locker
	wanted chan struct{}
}

func (l *signalLocker) Lock() {
	l.wanted <- struct{}{}
	l.Locker.Lock()
}

// A provider given a lock to hold answers once the lock is free, from the
// entities as they are then: what changed while the lock was held (a
// transaction in flight) is in the answer.
func TestProviderAnswersUnderTheHeldLock(t *testing.T) {
	t.Parallel()
	p := New()
	defer p.Close()
	var mu sync.Mutex
	l := &signalLocker{Locker: &mu, wanted: make(chan struct{}, 1)}
	p.Hold(l)
	mu.Lock() // a transaction in flight
	answered := make(chan []string, 1)
	go func() {
		var out struct{ Entities []entity }
		resp, err := http.Post(p.URL(), "application/json", bytes.NewBufferString(`{"keys": ["1"]}`))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
		}
		if err != nil {
			t.Errorf("lookup: %v", err)
		}
		keys := []string{}
		for _, e := range out.Entities {
			keys = append(keys, e.Key)
		}
		answered <- keys
	}()
	select {
	case <-l.wanted:
	case <-time.After(30 * time.Second):
		t.Fatal("the provider never asked for the lock")
	}
	p.Put("1", map[string]any{"n": 1}) // the transaction's change, then its end
	mu.Unlock()
	require.Equal(t, []string{"1"}, <-answered)
}
