package fakeremote

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

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
