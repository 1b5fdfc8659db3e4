package httpserver_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
)

// An action's refusal is answered with its kind's status and its message,
// wrapped or not, to pages and to the JSON API alike.
func TestRefusalsGetTheirKindsStatusAndMessage(t *testing.T) {
	t.Parallel()
	e, logs := newServer(t)
	for kind, status := range map[action.Kind]int{
		action.KindNotFound: http.StatusNotFound, action.KindConflict: http.StatusConflict,
		action.KindInvalid: http.StatusUnprocessableEntity, action.KindForbidden: http.StatusForbidden,
		action.KindUnavailable: http.StatusServiceUnavailable,
	} {
		r := &action.Refusal{Kind: kind, Message: "Refused: " + string(kind) + "."}
		e.GET("/api/"+string(kind), func(echo.Context) error { return fmt.Errorf("replay: %w", r) })
		e.GET("/"+string(kind), func(echo.Context) error { return r })

		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/"+string(kind), nil))
		require.Equal(t, status, rec.Code, kind)
		require.JSONEq(t, `{"error":"Refused: `+string(kind)+`."}`, rec.Body.String())

		rec = httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+string(kind), nil))
		require.Equal(t, status, rec.Code, kind)
		require.Equal(t, "<p>Refused: "+string(kind)+".</p>", rec.Body.String())
	}
	require.NotContains(t, logs.String(), "Refused: conflict", "a refusal is no failure")
}
