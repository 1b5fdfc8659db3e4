// Package msgfilter holds the meaning of the message filters that both the
// message list (/messages) and bulk replay jobs take, so that "replay this
// filter" selects exactly the messages the list shows: a topic or
// destination ending in "." or "*" is a prefix, and the error filter is a
// case-insensitive substring of the error's first ErrorSearchChars
// characters.
package msgfilter

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrorSearchChars is how much of a message's last error the error filter
// searches (substr(last_error, 1, 512) in the queries): an error can be a
// whole response body, and the search must stay bounded.
const ErrorSearchChars = 512

// ErrNoUpperBound refuses a prefix that ends in U+10FFFF or invalid UTF-8:
// no string lies above every string that starts with it, so it is no
// range of an index.
var ErrNoUpperBound = errors.New("msgfilter: the prefix cannot be searched: end it with another character")

// Name is a topic or destination filter as read by ParseName: Exact, or a
// Prefix with Upper, the least string above every string that starts with
// it (so that the prefix is one range, `~>=~ Prefix AND ~<~ Upper`, of a
// text_pattern_ops index), or neither (any name).
type Name struct {
	Exact, Prefix, Upper *string
}

// ParseName reads a topic or destination filter: a name ending in "*" or
// "." is a prefix (`order.*` and `order.` both match `order.created`); "*"
// alone and "" match every name; any other name matches itself only.
func ParseName(s string) (Name, error) {
	switch {
	case s == "":
		return Name{}, nil
	case !strings.HasSuffix(s, "*") && !strings.HasSuffix(s, "."):
		return Name{Exact: &s}, nil
	}
	pre := strings.TrimRight(s, "*")
	if pre == "" {
		return Name{}, nil
	}
	up, ok := prefixUpper(pre)
	if !ok {
		return Name{}, ErrNoUpperBound
	}
	return Name{Prefix: &pre, Upper: &up}, nil
}

// CanonicalName is the one spelling of a filter's meaning: a prefix as
// prefix + "*" (`order.` and `order.*` are the same filter), "" for every
// name, an exact name as it is. A bulk replay job keys its filter on it,
// so two spellings of one filter cannot run as two jobs.
func CanonicalName(s string) string {
	n, err := ParseName(s)
	switch {
	case err != nil:
		return s // refused where it is checked
	case n.Prefix != nil:
		return *n.Prefix + "*"
	case n.Exact != nil:
		return *n.Exact
	}
	return ""
}

// prefixUpper is the least string, in byte (code point) order, above every
// string that starts with prefix: the prefix with its last character
// replaced by the next one (no surrogates, which UTF-8 cannot hold). ok is
// false when no such string exists (the prefix ends in U+10FFFF).
func prefixUpper(prefix string) (upper string, ok bool) {
	r, size := utf8.DecodeLastRuneInString(prefix)
	if r == utf8.RuneError && size <= 1 || r == unicode.MaxRune {
		return "", false
	}
	next := r + 1
	if next == 0xD800 {
		next = 0xE000
	}
	return prefix[:len(prefix)-size] + string(next), true
}

// ErrorPattern is the error filter's text as the queries take it (ILIKE
// '%' || pattern || '%'): s with ILIKE's special characters escaped, so
// that it matches itself; nil for "".
func ErrorPattern(s string) *string {
	if s == "" {
		return nil
	}
	p := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
	return &p
}
