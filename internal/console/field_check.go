package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
)

// Text from outside is checked at the edge, before any handler reads it:
// PostgreSQL stores no NUL and no invalid UTF-8 (either is a 500 if it
// reaches a query), and an oversized filter or name costs every page that
// shows it. Every query parameter, path parameter and form field of every
// route (checkFields), every JSON body (decodeJSON) and every page cursor
// (parseCursor) goes through action.CheckText, which answers 422 naming
// the field. The actions then apply their own, tighter, maximums.

// maxFieldChars bounds any query, path or form field without a maximum of
// its own (fieldMaxChars): longer than every filter, name and reason.
const maxFieldChars = 2048

// fieldMaxChars are the fields with a maximum of their own: filters are
// short (a long ILIKE pattern costs every row it is matched against), the
// edit-and-replay form's payload is long.
var fieldMaxChars = map[string]int{
	"payload": action.MaxPayloadBytes,
	"topic":   action.MaxFilterChars, "destination": action.MaxFilterChars, "error": action.MaxFilterChars,
	"aggregate_type": action.MaxFilterChars, "aggregate_id": action.MaxFilterChars, "leased_by": action.MaxFilterChars,
	"error_contains": action.MaxFilterChars, "fingerprint": action.MaxFilterChars,
	"actor": action.MaxFilterChars, "source": action.MaxFilterChars, "action": action.MaxFilterChars,
}

// checkFields wraps next with the edge check of every query and path
// parameter and, for a form, every form field. The inbox's signed body is
// its own business (docs/inbox.md): it is not read here.
func checkFields(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for i, name := range c.ParamNames() {
			if err := checkField(name, c.ParamValues()[i]); err != nil {
				return err
			}
		}
		if err := checkValues(c.QueryParams()); err != nil {
			return err
		}
		req := c.Request()
		if req.Method == http.MethodPost && c.Path() != "/inbox/:source" &&
			strings.HasPrefix(req.Header.Get(echo.HeaderContentType), echo.MIMEApplicationForm) {
			form, err := c.FormParams()
			if err != nil {
				return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
			}
			if err := checkValues(form); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// checkValues checks every value of v under its name.
func checkValues(v map[string][]string) error {
	for name, values := range v {
		for _, value := range values {
			if err := checkField(name, value); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkField checks one field's value; a name that is empty or not clean
// text is reported as "parameter".
func checkField(name, value string) error {
	if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) || len(name) > 64 {
		name = "parameter"
	}
	max, ok := fieldMaxChars[name]
	if !ok {
		max = maxFieldChars
	}
	return action.CheckText(name, value, max)
}

// checkJSON checks a JSON document before it is decoded: valid UTF-8
// (encoding/json would silently replace what is not), and no string, key
// or value, holding a NUL (the \u0000 escape). where names the document
// in the refusal ("body", "cursor").
func checkJSON(where string, doc []byte) error {
	if !utf8.Valid(doc) {
		return action.CheckText(where, string(doc), len(doc))
	}
	if !bytes.Contains(doc, []byte(`\u0000`)) {
		return nil // the one way JSON spells a NUL
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil // not JSON: the decoder that follows says so
	}
	return checkJSONValue(where, v)
}

// checkJSONValue checks every string in v, naming the field by its path.
func checkJSONValue(path string, v any) error {
	switch v := v.(type) {
	case string:
		return action.CheckText(path, v, len(v)+1)
	case []any:
		for i, e := range v {
			if err := checkJSONValue(path+"["+strconv.Itoa(i)+"]", e); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range v {
			if err := checkField("key", k); err != nil {
				return err
			}
			if err := checkJSONValue(strings.TrimPrefix(path+"."+k, "body."), e); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldChecked is require with the edge check inside it: anonymous
// requests to signed-in routes are sent to sign in before their fields
// are looked at.
func (h *Handler) fieldChecked(need auth.Role, next echo.HandlerFunc) echo.HandlerFunc {
	return h.require(need, checkFields(next))
}
