package reconcile

import (
	"bytes"
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
		case it.RawFields != nil && bytes.Equal(it.RawFields, e.RawFields):
			inSync++ // the same bytes: nothing to decode
		case it.Fields != nil || it.RawFields != nil:
			if d := diffFields(fieldsOf(it.Fields, it.RawFields), fieldsOf(e.Fields, e.RawFields)); len(d) > 0 {
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

// fieldsOf returns fields, or raw's fields as json.RawMessage values
// (nil if raw is not a JSON object: no field is there).
func fieldsOf(fields map[string]any, raw json.RawMessage) map[string]any {
	if fields != nil || raw == nil {
		return fields
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
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

// sameValue compares two JSON values, decoded (json.Number for numbers)
// or not (json.RawMessage, what a TableSource and HTTPRemote give):
// identical raw bytes are the same without decoding; otherwise numbers
// compare by value (1 and 1.0 are the same), everything else structurally.
func sameValue(a, b any) bool {
	ar, aok := a.(json.RawMessage)
	br, bok := b.(json.RawMessage)
	if aok && bok && bytes.Equal(ar, br) {
		return true
	}
	a, b = decoded(a), decoded(b)
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

// decoded decodes a json.RawMessage (numbers as json.Number); any other
// value is returned as it is.
func decoded(v any) any {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return string(raw) // not JSON: compared as its text
	}
	return out
}
