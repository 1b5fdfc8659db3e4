package outbox

import "sync"

// messageKind is one of the two kinds a claim leases: unordered messages,
// or aggregates (each a delivery of its messages in order).
type messageKind int

const (
	unorderedKind messageKind = iota
	orderedKind
)

// kindSplits is what a dispatcher's claims remember of each destination
// to split it between the two kinds: the first statement of a claim
// leaves the other kind its half of the destination (firstCaps).
type kindSplits struct {
	mu sync.Mutex
	of map[string]*kindSplit // by destination; guarded by mu
}

// kindSplit is what kindSplits remembers of one destination.
type kindSplit struct {
	// notDue says, by kind, that the last claim of the destination that
	// saw anything of that kind there found it not due (kindSeen).
	notDue [2]bool
	// oddTo is the kind that gets the odd delivery of an odd cap at the
	// next claim that splits one, by any of the dispatcher's workers: it
	// flips at each, so that a destination with room for one delivery
	// gives it to each kind in turn, whichever goes first. (Two workers
	// that take turns at it may each give theirs to one kind; the
	// dispatcher still serves both.)
	oddTo messageKind
}

// get is name's split, made if new; s.mu is held.
func (s *kindSplits) get(name string) *kindSplit {
	if s.of == nil {
		s.of = map[string]*kindSplit{}
	}
	k := s.of[name]
	if k == nil {
		k = &kindSplit{}
		s.of[name] = k
	}
	return k
}

// firstCaps is what a claim's first statement, of kind first, may take of
// each of names: its kind's caps (own), but at most half of the other
// kind's (other), since took counts a delivery of either kind against
// both. Where a destination's share is smaller than half the claim (a
// guard's), the first kind would otherwise take all of it at every claim,
// and the other kind would never be leased there. A destination where the
// other kind was not due at its last claim keeps its whole cap for the
// first kind: where producers enqueue one kind only, a claim stays one
// statement (if the other kind is due by now, the first statement's rows
// say so, and the next claim splits).
func (s *kindSplits) firstCaps(names []string, own, other []int32, first messageKind) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	caps := make([]int32, len(own))
	for i, name := range names {
		split := s.get(name)
		if split.notDue[1-first] {
			caps[i] = own[i]
			continue
		}
		half := other[i] / 2
		if other[i]%2 == 1 {
			if split.oddTo == first {
				half++
			}
			split.oddTo = 1 - split.oddTo
		}
		caps[i] = min(own[i], half)
	}
	return caps
}

// kindSeen is what a claim's statements saw of one kind, by what it is
// most sure of at a destination: what the kind's own statements leased
// there (at: some, or none where they had room and were not cut short),
// else the last report of the other kind's statements (reported, on
// their rows: AggregatesDue, UnorderedDue), which is about all the claim's
// destinations at once: due at some of them (perhaps not this one), or at
// none. A report of some counts as due at each destination the kind's own
// statements did not look at: where the first kind took a destination's
// whole share, the other kind's statement could not look there, and only
// a report keeps that destination split at its next claim.
type kindSeen struct {
	at       map[string]bool
	reported *bool
}

// remember keeps what a claim of names saw of each kind at each of them;
// a kind it saw nothing of there keeps what an earlier claim saw.
func (s *kindSplits) remember(names []string, seen [2]kindSeen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		split := s.get(name)
		for kind, k := range seen {
			if leased, ok := k.at[name]; ok {
				split.notDue[kind] = !leased
			} else if k.reported != nil {
				split.notDue[kind] = !*k.reported
			}
		}
	}
}
