package console

import (
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Keyset cursors of more than one column travel in the URL as base64url
// JSON: opaque to the user, read back into the struct they came from.

func encodeCursor(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("encode a page cursor: " + err.Error()) // plain structs always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads the cursor in query parameter name into v; it reports
// whether one was given.
func decodeCursor(c echo.Context, name string, v any) (bool, error) {
	s := c.QueryParam(name)
	if s == "" {
		return false, nil
	}
	return true, parseCursor(s, v)
}

// parseCursor reads cursor s into v: base64url JSON whose strings are
// clean text (checkJSON); anything else is a 400.
func parseCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = checkJSON("cursor", b)
	}
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The page cursor is not valid: start from the first page.")
	}
	return nil
}
