package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthShow answers while the process is up; it touches nothing else.
func (h *Handler) healthShow(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

// readinessShow answers 200 when the database is reachable and migrated, 503
// otherwise, within two seconds either way.
func (h *Handler) readinessShow(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := h.deps.Readiness.Ready(ctx); err != nil {
		// The cause names hosts, users and paths: it goes to the log, and
		// the unauthenticated caller gets only the kind of problem.
		h.deps.Logger.WarnContext(ctx, "not ready", "error", err)
		reason := "database unreachable"
		if errors.Is(err, ErrMigrationsPending) {
			reason = "database migrations pending"
		}
		return c.String(http.StatusServiceUnavailable, "not ready: "+reason+"\n")
	}
	return c.String(http.StatusOK, "ready\n")
}
