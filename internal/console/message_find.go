package console

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
)

// messageFind serves GET /m/:key, the deep link by message id, which is
// also the idempotency key every delivery carries (webhook-id,
// Nats-Msg-Id): it redirects to the message's page.
func (h *Handler) messageFind(c echo.Context) error {
	key, err := uuid.Parse(c.Param("key"))
	if err != nil {
		return errNotFound("Message")
	}
	id, err := queries.New(h.deps.DB).ConsoleMessageIDGetByMessageID(c.Request().Context(), key)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotFound("Message")
	}
	if err != nil {
		return fmt.Errorf("look up message %s: %w", key, err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/messages/%d", id))
}
