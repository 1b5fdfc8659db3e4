package console

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/web/templates"
)

// The configuration forms (destination_form.go, source_form.go) post as
// plain HTML forms. A save that succeeds redirects to the saved row's
// page (303, ?saved=1); a refusal answers the same form, 422, with every
// value as typed and the field at fault marked; a forbidden one is
// recorded and answered 403 (recordDenials).

func destinationURL(name string) string { return "/settings/destinations/" + url.PathEscape(name) }
func sourceURL(name string) string      { return "/settings/sources/" + url.PathEscape(name) }

// formValues reads the named fields of the request's form as typed, and
// which of the checkboxes are on.
func formValues(c echo.Context, fields, checkboxes []string) templates.FormState {
	f := templates.FormState{Values: map[string]string{}, Checked: map[string]bool{}}
	for _, name := range fields {
		f.Values[name] = c.FormValue(name)
	}
	for _, name := range checkboxes {
		f.Checked[name] = c.FormValue(name) != ""
	}
	return f
}

// refusedForm puts a refusal of a save into the form, and returns the
// status to answer with; a forbidden or unavailable refusal and any other
// error are returned as they are (to recordDenials and the error handler).
func refusedForm(f *templates.FormState, err error) (int, error) {
	r := action.AsRefusal(err)
	if r == nil || r.Kind == action.KindForbidden || r.Kind == action.KindUnavailable {
		return 0, err
	}
	f.ErrField, f.Err = r.Field, r.Message
	switch r.Kind {
	case action.KindNotFound:
		return http.StatusNotFound, nil
	case action.KindConflict:
		return http.StatusConflict, nil
	}
	return http.StatusUnprocessableEntity, nil
}

// errNoSetting is a path naming no destination or source.
func errNoSetting(what string) error {
	return echo.NewHTTPError(http.StatusNotFound, "No such "+what+".")
}
