package console

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/idempotency"
	"github.com/switchyard/switchyard/internal/triage"
)

// triageSocket serves GET /ws: the triage page's WebSocket (internal/ws).
// The route table's viewer check has authenticated the session cookie;
// the socket checks it again on its own schedule and before every
// mutation, through the same cookie.
func (h *Handler) triageSocket(c echo.Context) error {
	if h.deps.TriageSocket == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Live triage is not available in this process.")
	}
	p := current(c)
	var token string
	if cookie, err := c.Cookie(h.cookieName()); err == nil {
		token = cookie.Value
	}
	recheck := func(ctx context.Context) (auth.Principal, error) {
		if p.SessionID == 0 {
			return p, nil // the demo admin has no session to end
		}
		return h.deps.Auth.Authenticate(ctx, token)
	}
	h.deps.TriageSocket.Serve(c.Response(), c.Request(), p, c.RealIP(), recheck)
	return nil
}

// triageMutate serves POST /triage/mutations, the HTTP fallback of the
// socket's "mutate": the body is a triage.Input and the Idempotency-Key
// header is its mutation id. The same mutation, over either transport,
// gets the same stored answer: 200 for an ack, 409 for a reject, 403 for
// a role that may not mutate (refused and audited by the engine).
func (h *Handler) triageMutate(c echo.Context) error {
	if h.deps.Triage == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Triage is not available in this process.")
	}
	var in triage.Input
	if err := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 16<<10)).Decode(&in); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The body must be a triage mutation (JSON, at most 16 KiB).")
	}
	if key := c.Request().Header.Get(idempotency.Header); key != "" {
		id, err := uuid.Parse(key)
		if err != nil || (in.MutationID != uuid.Nil && in.MutationID != id) {
			return echo.NewHTTPError(http.StatusBadRequest, "The Idempotency-Key header must be the mutation id.")
		}
		in.MutationID = id
	}
	in.RemoteAddr = c.RealIP()
	a, err := h.deps.Triage.Mutate(c.Request().Context(), current(c), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	switch {
	case a.Reason == triage.RejectForbidden:
		status = http.StatusForbidden
	case !a.OK:
		status = http.StatusConflict
	}
	return c.JSON(status, a)
}
