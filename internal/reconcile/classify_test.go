package reconcile

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	n := func(s string) json.Number { return json.Number(s) }
	items := []Item{
		{Key: "1", Fields: map[string]any{"a": n("1"), "b": "x"}},
		{Key: "2", Fields: map[string]any{"a": n("1.0"), "b": "x"}},
		{Key: "3", Fields: map[string]any{"a": n("2"), "b": "x"}},
		{Key: "4", Fields: map[string]any{"a": n("2"), "b": "x"}},
		{Key: "5"},
	}
	entities := []Entity{
		{Key: "1", Fields: map[string]any{"a": n("1"), "b": "x"}},
		{Key: "2", Fields: map[string]any{"a": n("1"), "b": "x"}},
		{Key: "3", Fields: map[string]any{"a": n("2")}},
		{Key: "5"},
		{Key: "6"}, {Key: "7"},
	}
	exists := func(_ context.Context, key string) (bool, error) { return key == "7", nil }
	inSync, found, err := classify(context.Background(), items, entities, exists)
	require.NoError(t, err)
	require.Equal(t, int64(3), inSync, "1, 2 (1 = 1.0) and 5 (presence only)")
	require.Equal(t, []drift{
		{key: "3", kind: Mismatch, diff: map[string]fieldDiff{"b": {Local: "x", Remote: nil}}},
		{key: "4", kind: MissingRemote},
		{key: "6", kind: MissingLocal},
	}, found, "7 was inserted locally after the cycle started: not missing")
}

// Fields as JSON text (a TableSource's and HTTPRemote's) compare by value
// whatever their spelling: equal bytes fast, different spellings of one
// value decoded.
func TestSameValueRaw(t *testing.T) {
	t.Parallel()
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		a, b any
		same bool
	}{
		{raw(`7`), raw(`7`), true},
		{raw(`1`), raw(`1.0`), true},
		{raw(`"<a>"`), raw(`"\u003ca\u003e"`), true},
		{raw(`{"x": [1, 2]}`), raw(`{"x":[1,2]}`), true},
		{raw(`null`), nil, true},
		{raw(`"open"`), "open", true},
		{raw(`2`), json.Number("2.0"), true},
		{raw(`7`), raw(`-1`), false},
		{raw(`"7"`), raw(`7`), false},
		{raw(`null`), raw(`0`), false},
	}
	for _, c := range cases {
		require.Equal(t, c.same, sameValue(c.a, c.b), "%v vs %v", c.a, c.b)
		require.Equal(t, c.same, sameValue(c.b, c.a), "%v vs %v", c.b, c.a)
	}
}

// Fields as one JSON object (RawFields) are in sync when the bytes are
// equal, and otherwise compared field by field: another spelling or an
// extra remote field is no drift, a different value is.
func TestClassifyRawFields(t *testing.T) {
	t.Parallel()
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	items := []Item{
		{Key: "1", RawFields: raw(`{"a":1,"b":"x"}`)},
		{Key: "2", RawFields: raw(`{"a":1,"b":"x"}`)},
		{Key: "3", RawFields: raw(`{"a":1,"b":"<x>"}`)},
		{Key: "4", RawFields: raw(`{"a":1,"b":"x"}`)},
	}
	entities := []Entity{
		{Key: "1", RawFields: raw(`{"a":1,"b":"x"}`)},
		{Key: "2", RawFields: raw(`{ "b": "x", "a": 1.0, "c": true }`)},
		{Key: "3", RawFields: raw(`{"a":1,"b":"\u003cx\u003e"}`)},
		{Key: "4", RawFields: raw(`{"a":2,"b":"x"}`)},
	}
	inSync, found, err := classify(context.Background(), items, entities, nil)
	require.NoError(t, err)
	require.Equal(t, int64(3), inSync)
	require.Equal(t, []drift{{key: "4", kind: Mismatch, diff: map[string]fieldDiff{"a": {Local: raw(`1`), Remote: raw(`2`)}}}}, found)
}
