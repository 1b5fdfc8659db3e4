package changefeed

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxOpen bounds how many open transactions a Position remembers, and so
// the length of an SSE event id (about 12 bytes each). A Listener that
// would have to remember more stops before the rows that would need it
// (it is held back, as by the old watermark, by the oldest of them) until
// some end: see Status.HeldBack.
const MaxOpen = 64

// Open is a transaction that was still in progress when a Position was
// read, below the Position's cursor: its rows may still commit behind
// the cursor. Seen is the id of its last row delivered (0: none yet).
type Open struct {
	XID  uint64
	Seen int64
}

// Position is what a reader has been delivered: every change at or
// before After, except the rows of the Open transactions with an id above
// their Seen; and nothing after After. It is a set, not a point, so any
// instance can interpret it: a Listener's Position and the Position after
// each change it delivers are resumable cursors on every instance.
//
// Open is sorted by XID, every XID below After.XID, at most MaxOpen of
// them. A Position with no Open transaction is a plain Cursor and encodes
// as one ("xid-id"), so old event ids resume.
type Position struct {
	After Cursor
	Open  []Open
}

// At is the Position that has delivered every change up to c, and none of
// an open transaction: what a Cursor meant before positions.
func At(c Cursor) Position { return Position{After: c} }

// String encodes p as "xid-id" followed by ".xid" or ".xid-seen" for each
// open transaction: the form used as an SSE event id.
func (p Position) String() string {
	var b strings.Builder
	b.WriteString(p.After.String())
	for _, o := range p.Open {
		b.WriteByte('.')
		b.WriteString(strconv.FormatUint(o.XID, 10))
		if o.Seen > 0 {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(o.Seen, 10))
		}
	}
	return b.String()
}

// ParsePosition decodes what Position.String produced, and refuses
// anything that String could not have produced.
func ParsePosition(s string) (Position, error) {
	parts := strings.Split(s, ".")
	if len(parts) > MaxOpen+1 {
		return Position{}, fmt.Errorf("changefeed: invalid position %q: more than %d open transactions", s, MaxOpen)
	}
	after, err := ParseCursor(parts[0])
	if err != nil {
		return Position{}, err
	}
	p := Position{After: after}
	for _, part := range parts[1:] {
		if !strings.Contains(part, "-") {
			part += "-0"
		}
		c, err := ParseCursor(part)
		if err != nil || c.XID >= after.XID || (len(p.Open) > 0 && c.XID <= p.Open[len(p.Open)-1].XID) {
			return Position{}, fmt.Errorf("changefeed: invalid position %q", s)
		}
		p.Open = append(p.Open, Open{XID: c.XID, Seen: c.ID})
	}
	return p, nil
}

// open returns the Open entry of xid, if p has one.
func (p Position) open(xid uint64) (Open, bool) {
	i, ok := slices.BinarySearchFunc(p.Open, xid, func(o Open, x uint64) int {
		switch {
		case o.XID < x:
			return -1
		case o.XID > x:
			return 1
		}
		return 0
	})
	if !ok {
		return Open{}, false
	}
	return p.Open[i], true
}

// Has reports whether p includes the change at c.
func (p Position) Has(c Cursor) bool {
	if c.Compare(p.After) > 0 {
		return false
	}
	o, ok := p.open(c.XID)
	return !ok || c.ID <= o.Seen
}

// Within reports that every change p includes, q includes too, judged
// from the two positions alone. False means q may lack some of p's
// changes (q's reader is behind p's, or p is not a real position): a
// client at p cannot resume from a hub at q and must resync.
func (p Position) Within(q Position) bool {
	if p.After.Compare(q.After) > 0 {
		return false
	}
	for _, o := range q.Open {
		if o.XID > p.After.XID {
			break
		}
		// q lacks o's rows above o.Seen: p must lack them too.
		po, ok := p.open(o.XID)
		if !ok || po.Seen > o.Seen {
			return false
		}
	}
	return true
}

// Equal reports whether p and q are the same position.
func (p Position) Equal(q Position) bool {
	return p.After == q.After && slices.Equal(p.Open, q.Open)
}

// upTo is p cut at the change c (c in p, after every change already
// replayed): the position of a reader that has every change of q up to c.
// The transactions p still waits for below c stay open; those above it
// are after c anyway.
func (p Position) upTo(c Cursor) Position {
	cut := Position{After: c}
	for _, o := range p.Open {
		if o.XID >= c.XID {
			break
		}
		cut.Open = append(cut.Open, o)
	}
	return cut
}
