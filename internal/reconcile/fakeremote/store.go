package fakeremote

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
)

// store holds the entities, each encoded as the provider answers it, in
// one byte arena. A key that is an integer in canonical form (the usual
// case: a table's bigint key) is indexed in a map without pointers, and
// the key order of such keys is a []int64: a million entities then cost
// the garbage collector next to nothing to mark, which matters because the
// benchmark's provider shares its process with the runner it measures.
// Other keys are indexed by string. Dropped and replaced entities leave
// their bytes in the arena: this is a test double.
type store struct {
	arena []byte
	ints  map[int64]span
	strs  map[string]span
	// order is every key in key order, built when needed; nil when stale.
	// intOrder is used instead while every key is an integer.
	order    []string
	intOrder []int64
	sorted   bool
}

// span is an entity's bytes in the arena; its key's JSON string is the
// kn bytes after the opening `{"key":`.
type span struct {
	off uint64
	n   uint32
	kn  uint32
}

func newStore() *store {
	return &store{ints: map[int64]span{}, strs: map[string]span{}}
}

// intKey is key's integer when key is one in canonical form.
func intKey(key string) (int64, bool) {
	n, err := strconv.ParseInt(key, 10, 64)
	return n, err == nil && strconv.FormatInt(n, 10) == key
}

func (s *store) put(key string, raw []byte, kn int) {
	sp := span{off: uint64(len(s.arena)), n: uint32(len(raw)), kn: uint32(kn)}
	s.arena = append(s.arena, raw...)
	if n, ok := intKey(key); ok {
		if _, had := s.ints[n]; !had {
			s.sorted = false
		}
		s.ints[n] = sp
		return
	}
	if _, had := s.strs[key]; !had {
		s.sorted = false
	}
	s.strs[key] = sp
}

func (s *store) get(key string) (span, bool) {
	if n, ok := intKey(key); ok {
		sp, found := s.ints[n]
		return sp, found
	}
	sp, found := s.strs[key]
	return sp, found
}

func (s *store) bytes(sp span) []byte { return s.arena[sp.off : sp.off+uint64(sp.n)] }

// found is the entity at sp as Lookup gives it: the key decoded from its
// JSON string, the fields (copied) cut out of `{"key":K,"fields":F}`.
func (s *store) found(sp span) Found {
	b := s.bytes(sp)
	const open, mid = len(`{"key":`), len(`,"fields":`)
	quoted := b[open : open+int(sp.kn)]
	var f Found
	if bytes.IndexByte(quoted, '\\') < 0 {
		f.Key = string(quoted[1 : len(quoted)-1])
	} else if err := json.Unmarshal(quoted, &f.Key); err != nil {
		panic("fakeremote: a stored key is not a JSON string: " + err.Error())
	}
	if rest := b[open+int(sp.kn):]; len(rest) > mid+1 { // `,"fields":F}`, not `}`
		f.Fields = bytes.Clone(rest[mid : len(rest)-1])
	}
	return f
}

func (s *store) drop(key string) {
	if n, ok := intKey(key); ok {
		if _, had := s.ints[n]; had {
			delete(s.ints, n)
			s.sorted = false
		}
		return
	}
	if _, had := s.strs[key]; had {
		delete(s.strs, key)
		s.sorted = false
	}
}

// inRange calls fn with every entity whose key is in (after, through]
// (nil ends are open), in key order.
func (s *store) inRange(after, through *string, fn func(span)) {
	s.sort()
	if len(s.strs) == 0 && intBound(after) && intBound(through) {
		lo, hi := 0, len(s.intOrder)
		if after != nil {
			a, _ := strconv.ParseInt(*after, 10, 64) // intOrder is used only when the bounds are integers
			lo, _ = slices.BinarySearch(s.intOrder, a)
			if lo < len(s.intOrder) && s.intOrder[lo] == a {
				lo++
			}
		}
		if through != nil {
			t, _ := strconv.ParseInt(*through, 10, 64)
			hi, _ = slices.BinarySearch(s.intOrder, t)
			if hi < len(s.intOrder) && s.intOrder[hi] == t {
				hi++
			}
		}
		for i := lo; i < hi; i++ {
			fn(s.ints[s.intOrder[i]])
		}
		return
	}
	if s.order == nil {
		s.sortStrings()
	}
	i := 0
	if after != nil {
		i, _ = slices.BinarySearchFunc(s.order, *after, compareKeys)
		if i < len(s.order) && s.order[i] == *after {
			i++
		}
	}
	for ; i < len(s.order) && (through == nil || compareKeys(s.order[i], *through) <= 0); i++ {
		sp, _ := s.get(s.order[i])
		fn(sp)
	}
}

// intBound reports whether a range's end is open or an integer.
func intBound(b *string) bool {
	if b == nil {
		return true
	}
	_, err := strconv.ParseInt(*b, 10, 64)
	return err == nil
}

// sort builds the integer keys' order when stale (and forgets the order
// of all keys, built again when needed).
func (s *store) sort() {
	if s.sorted {
		return
	}
	s.sorted = true
	s.intOrder = make([]int64, 0, len(s.ints))
	for n := range s.ints {
		s.intOrder = append(s.intOrder, n)
	}
	slices.Sort(s.intOrder)
	s.order = nil
}

// sortStrings builds the order of all keys, as strings in compareKeys
// order.
func (s *store) sortStrings() {
	s.order = make([]string, 0, len(s.ints)+len(s.strs))
	for _, n := range s.intOrder {
		s.order = append(s.order, strconv.FormatInt(n, 10))
	}
	for k := range s.strs {
		s.order = append(s.order, k)
	}
	slices.SortFunc(s.order, compareKeys)
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
