package console

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
)

// Viewers see payloads only when configured to; operators and admins
// always do.
func TestPayloadVisibleByRole(t *testing.T) {
	t.Parallel()
	e := echo.New()
	for _, tc := range []struct {
		role           auth.Role
		viewerPayloads bool
		want           bool
	}{
		{auth.Viewer, false, false}, {auth.Viewer, true, true},
		{auth.Operator, false, true}, {auth.Admin, false, true}, {auth.Public, false, false},
	} {
		h := New(Deps{ViewerPayloads: tc.viewerPayloads})
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), httptest.NewRecorder())
		c.Set(principalKey, auth.Principal{Name: "x", Role: tc.role})
		require.Equal(t, tc.want, h.PayloadVisible(c), "%v with viewer payloads %v", tc.role, tc.viewerPayloads)
	}
}
