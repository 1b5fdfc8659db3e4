package templates

import (
	"slices"
	"strings"

	"github.com/a-h/templ"
)

// fieldLabel is how the error summary names a form field.
func fieldLabel(name string) string {
	if name == "breaker_failure_percent" {
		return "breaker failure %"
	}
	return strings.ReplaceAll(name, "_", " ")
}

// withValue is options with v added when it is not one of them (a value
// saved by hand, kept rather than silently replaced).
func withValue(options []string, v string) []string {
	if v == "" || slices.Contains(options, v) {
		return options
	}
	return append(slices.Clone(options), v)
}

func optionLabel(o string) string { return o }

func numeric() templ.Attributes {
	return templ.Attributes{"inputmode": "numeric", "autocomplete": "off", "class": "short"}
}

func decimal() templ.Attributes {
	return templ.Attributes{"inputmode": "decimal", "autocomplete": "off", "class": "short"}
}

func checkedAt(at string) string {
	if at == "" {
		return ""
	}
	return " (" + at + ")"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fieldErr is a rename or delete refusal's text when it concerns field,
// for the field's own note ("" otherwise: the panel's alert says it).
func fieldErr(r RemoveForm, field string) string {
	if r.ErrField == field {
		return r.Err
	}
	return ""
}
