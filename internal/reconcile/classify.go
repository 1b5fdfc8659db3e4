package reconcile

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// drift is one key found out of sync in a batch.
type drift struct {
	key  string
	kind string
	ref  int64
	diff map[string]fieldDiff
}

// fieldDiff is a mismatched field's two values.
type fieldDiff struct {
	Local  any `json:"local"`
	Remote any `json:"remote"`
}

// classify compares a batch's items with the remote's entities; extras
// are the remote's keys in the batch's range that no item has (ranged
// sources only), confirmed absent locally by exists.
func classify(ctx context.Context, items []Item, entities []Entity, exists func(context.Context, string) (bool, error)) (inSync int64, found []drift, err error) {
	remote := make(map[string]Entity, len(entities))
	for _, e := range entities {
		remote[e.Key] = e
	}
	local := make(map[string]bool, len(items))
	for _, it := range items {
		local[it.Key] = true
		e, ok := remote[it.Key]
		switch {
		case !ok:
			found = append(found, drift{key: it.Key, kind: MissingRemote, ref: it.Ref})
		case it.Fields != nil:
			if d := diffFields(it.Fields, e.Fields); len(d) > 0 {
				found = append(found, drift{key: it.Key, kind: Mismatch, ref: it.Ref, diff: d})
			} else {
				inSync++
			}
		default:
			inSync++
		}
	}
	if exists == nil {
		return inSync, found, nil
	}
	for _, key := range slices.Sorted(maps.Keys(remote)) {
		if local[key] {
			continue
		}
		there, err := exists(ctx, key)
		if err != nil {
			return 0, nil, err
		}
		if !there { // inserted after the cycle started otherwise: the next cycle's
			found = append(found, drift{key: key, kind: MissingLocal})
		}
	}
	return inSync, found, nil
}

// diffFields returns the fields of local whose remote value differs.
func diffFields(local, remote map[string]any) map[string]fieldDiff {
	var d map[string]fieldDiff
	for name, lv := range local {
		rv := remote[name]
		if sameValue(lv, rv) {
			continue
		}
		if d == nil {
			d = map[string]fieldDiff{}
		}
		d[name] = fieldDiff{Local: lv, Remote: rv}
	}
	return d
}

// sameValue compares two decoded JSON values; numbers compare by value
// (1 and 1.0 are the same), everything else structurally.
func sameValue(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		if an == bn {
			return true
		}
		af, aerr := strconv.ParseFloat(string(an), 64)
		bf, berr := strconv.ParseFloat(string(bn), 64)
		return aerr == nil && berr == nil && af == bf
	}
	return reflect.DeepEqual(a, b)
}
