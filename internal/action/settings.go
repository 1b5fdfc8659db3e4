package action

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
)

// The configuration actions (destination_save.go, source_save.go,
// settings_test_event.go) edit switchyard.destinations and
// switchyard.inbox_sources: admins only. Every one takes the form's
// values as typed (text), so that a refusal names the field at fault
// (Refusal.Field, the form's field name) and the form can show it again
// with everything the admin typed. The dispatchers and receivers reread
// the tables every 10 s, so an edit is used by every instance within
// that time, without a restart.

// Audit actions of the configuration pages.
const (
	AuditDestinationCreate = "destination.create"
	AuditDestinationUpdate = "destination.update"
	AuditDestinationTest   = "destination.test"
	AuditSourceCreate      = "inbox_source.create"
	AuditSourceUpdate      = "inbox_source.update"
	AuditSourceTest        = "inbox_source.test"
)

// MaxSettingChars bounds every text field of the configuration forms but
// the lists (characters).
const MaxSettingChars = 500

// maxSecretRefs bounds a list of secret references.
const maxSecretRefs = 8

// namePattern is what a destination's or source's name may be: the
// tables' CHECK says the same.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// envNamePattern is what a secret reference may be: an environment
// variable's name.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// requireAdmin refuses an actor below admin.
func requireAdmin(a Actor) error {
	return requireRole(a, auth.Admin, "Changing the configuration needs the admin role.")
}

// checkName checks a destination's or source's name.
func checkName(name, what string) error {
	if err := CheckText("name", name, MaxSettingChars); err != nil {
		return err
	}
	if !namePattern.MatchString(name) {
		return invalid("name", fmt.Sprintf("A %s's name is 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit.", what))
	}
	return nil
}

// splitList splits a list typed one item a line, or separated by commas
// or spaces, dropping empty items.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

// parseSecretRefs parses field's list of environment variable names.
func parseSecretRefs(field, text string) ([]string, error) {
	if err := CheckText(field, text, MaxSettingChars); err != nil {
		return nil, err
	}
	refs := splitList(text)
	if len(refs) > maxSecretRefs {
		return nil, invalid(field, fmt.Sprintf("At most %d secret references.", maxSecretRefs))
	}
	for _, r := range refs {
		if !envNamePattern.MatchString(r) {
			return nil, invalid(field, fmt.Sprintf("%q is not an environment variable's name (letters, digits and '_', not starting with a digit). Name the variable that holds the secret, never the secret.", clip(r)))
		}
	}
	return refs, nil
}

// intField parses field as a whole number from lo to hi.
func intField(field, text string, lo, hi int64, unit string) (int32, error) {
	if err := CheckText(field, text, 40); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid(field, fmt.Sprintf("The %s must be a whole number from %d to %d%s; got %q.", label(field), lo, hi, unit, clip(text)))
	}
	return int32(n), nil
}

// floatField parses field as a number from lo to hi.
func floatField(field, text string, lo, hi float64, unit string) (float64, error) {
	if err := CheckText(field, text, 40); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || f != f || f < lo || f > hi {
		return 0, invalid(field, fmt.Sprintf("The %s must be a number from %g to %g%s; got %q.", label(field), lo, hi, unit, clip(text)))
	}
	return f, nil
}

// clip shortens what the user typed for a message.
func clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// configChanged appends a changefeed.KindConfig change for what (a
// "destination" or "source") named name in tx: open configuration pages
// re-read their lists.
func configChanged(ctx context.Context, tx pgx.Tx, what, name, action string) error {
	payload, err := json.Marshal(map[string]string{"action": action})
	if err != nil {
		return fmt.Errorf("encode the change of %s: %w", action, err)
	}
	err = changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindConfig, Subject: what + "/" + name, Payload: payload})
	if err != nil {
		return fmt.Errorf("%s %s changed: %w", what, name, err)
	}
	return nil
}
