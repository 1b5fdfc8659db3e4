package action

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Maximums of the operator's text fields, checked before the database: a
// reason lands in the append-only audit log and is shown on every page of
// the trail, so an unbounded one would fill the disk and every Audit page.
// A value over its maximum, holding a NUL or not valid UTF-8 is refused
// (KindInvalid, naming the field).
const (
	// MaxReasonChars bounds a reason (characters); the forms say the same
	// (maxlength).
	MaxReasonChars = 500
	// MaxFilterChars bounds each text field of a bulk replay filter
	// (characters).
	MaxFilterChars = 200
	// MaxPayloadBytes bounds an edited payload: the outbox's own maximum.
	MaxPayloadBytes = outbox.MaxPayloadBytes
)

// CheckText refuses a value of field longer than maxChars characters,
// holding a NUL, or not valid UTF-8 (PostgreSQL stores neither): a
// *Refusal of KindInvalid naming the field. It is the one check of text
// from outside: the console's edge checks every query, form and JSON field
// with it too.
func CheckText(field, value string, maxChars int) error {
	switch {
	case !utf8.ValidString(value) || strings.ContainsRune(value, 0):
		return invalid(field, fmt.Sprintf("The %s must be UTF-8 text without NUL characters.", label(field)))
	case utf8.RuneCountInString(value) > maxChars:
		return invalid(field, fmt.Sprintf("The %s is too long: at most %d characters.", label(field), maxChars))
	}
	return nil
}

// label is how a message names field.
func label(field string) string {
	return strings.ReplaceAll(strings.TrimPrefix(field, "filter."), "_", " ") + fieldSuffix(field)
}

func fieldSuffix(field string) string {
	if strings.HasPrefix(field, "filter.") {
		return " filter"
	}
	return ""
}

// checkFilter checks every text field of f.
func checkFilter(f bulkreplay.Filter) error {
	for _, fv := range []struct{ name, value string }{
		{"fingerprint", f.Fingerprint}, {"destination", f.Destination}, {"topic", f.Topic},
		{"aggregate_type", f.AggregateType}, {"aggregate_id", f.AggregateID}, {"error_contains", f.ErrorContains},
	} {
		if err := CheckText("filter."+fv.name, fv.value, MaxFilterChars); err != nil {
			return err
		}
	}
	for _, fv := range []struct{ name, value string }{{"topic", f.Topic}, {"destination", f.Destination}} {
		if _, err := msgfilter.ParseName(fv.value); err != nil {
			return invalid("filter."+fv.name, "The "+fv.name+" prefix cannot be searched: end it with another character.")
		}
	}
	if !f.DeadFrom.IsZero() && !f.DeadTo.IsZero() && f.DeadTo.Before(f.DeadFrom) {
		return invalid("filter.dead_to", "The filter's dead_to is before its dead_from.")
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && f.CreatedTo.Before(f.CreatedFrom) {
		return invalid("filter.created_to", "The filter's created_to is before its created_from.")
	}
	return nil
}
