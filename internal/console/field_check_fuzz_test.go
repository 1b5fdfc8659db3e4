package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
)

// clean reports whether every string is one PostgreSQL can take.
func clean(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return false
		}
	}
	return true
}

// isBadRequest reports whether err is the client's fault: a 400, or a
// refusal of invalid input.
func isBadRequest(err error) bool {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code == http.StatusBadRequest
	}
	r := action.AsRefusal(err)
	return r != nil && r.Kind == action.KindInvalid && r.Field != ""
}

// A page cursor either reads into clean strings or is a 400: never a
// value that would fail in the database.
func FuzzParseCursor(f *testing.F) {
	for _, seed := range []string{"", "e30", "eyJ0IjoiMjAyNi0xMS0yOVQxNDozMDowMFoiLCJmIjoiYSJ9",
		"eyJmIjoiXHUwMDAwIn0", "eyJmIjoi_yJ9", "%%%", "bnVsbA"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var group groupCursor
		if err := parseCursor(s, &group); err != nil {
			if !isBadRequest(err) {
				t.Fatalf("cursor %q: %v, want a 400", s, err)
			}
		} else if !clean(group.Fingerprint) {
			t.Fatalf("cursor %q read into %q", s, group.Fingerprint)
		}
		var blocked blockedCursor
		if err := parseCursor(s, &blocked); err != nil {
			if !isBadRequest(err) {
				t.Fatalf("cursor %q: %v, want a 400", s, err)
			}
		} else if !clean(blocked.Destination, blocked.AggregateType, blocked.AggregateID) {
			t.Fatalf("cursor %q read into %+v", s, blocked)
		}
	})
}

// The message list's filters, as the edge check and the parser read them
// from any query string: either refused as the client's fault, or read
// into parameters PostgreSQL can take. (from, to and id need the database
// to resolve: the route walk covers them.)
func FuzzMessageFilter(f *testing.F) {
	for _, seed := range []string{"", "topic=orders", "topic=%00", "error=%ff", "state=dead&destination=a%5Cb",
		"aggregate_id=" + strings.Repeat("x", 3000), "state=bogus", "error=100%25_off"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return // echo reads what it can; the route walk covers the rest
		}
		v.Del("from")
		v.Del("to")
		v.Del("id")
		if err := checkValues(v); err != nil {
			if !isBadRequest(err) {
				t.Fatalf("%q: %v, want a refusal naming the field", raw, err)
			}
			return
		}
		mf, err := parseMessageFilter(context.Background(), nil, v)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("%q: %v, want a 400", raw, err)
			}
			return
		}
		p := mf.params
		for _, s := range []*string{p.State, p.Topic, p.Destination, p.AggregateType, p.AggregateID, p.ErrorText} {
			if s != nil && !clean(*s) {
				t.Fatalf("%q read into %q", raw, *s)
			}
		}
	})
}
