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
