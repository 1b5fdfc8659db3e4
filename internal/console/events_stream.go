package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
)

// sessionEnded is written to a stream whose session was revoked, just
// before it closes: the page's script (console.js) takes the browser to
// the sign-in form, instead of letting EventSource reconnect into a 401.
const sessionEnded = "event: session_ended\ndata: {}\n\n"

// tooManyStreams is written to a stream closed because its session or
// account opened too many (auth.StreamLimits): the browser waits a minute
// before it reconnects, so that more tabs than the cap take turns slowly
// instead of closing each other in a loop.
const tooManyStreams = "retry: 60000\nevent: streams_capped\ndata: {}\n\n"

// eventsStream serves the live change stream (Server-Sent Events; see
// internal/sse for the events and the resume and resync rules). The stream
// is written straight to the connection: no gzip or timeout middleware may
// wrap this route, since either would buffer or cut a stream that is meant
// to stay open for hours.
//
// A stream lives no longer than its session: Deps.Streams cancels it when
// the session is revoked on any console instance, and at the session's
// absolute timeout; and when its session or account opens more streams
// than auth.StreamLimits allow, the oldest ends. (An open stream is not activity: it does not hold off
// the idle timeout, which the next page load meets.) The session is checked
// again after the watch starts, so a revocation that committed between the
// access check and the watch is not missed.
func (h *Handler) eventsStream(c echo.Context) error {
	if h.deps.Events == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Live updates are not available in this process.")
	}
	req := c.Request()
	if p := current(c); p.SessionID != 0 && h.deps.Streams != nil {
		ctx, stop := h.deps.Streams.Open(req.Context(), p)
		defer stop()
		if _, err := h.principal(c); err != nil {
			if errors.Is(err, auth.ErrNoSession) {
				return h.unauthenticated(c)
			}
			return err
		}
		req = req.WithContext(ctx)
		defer func() {
			last := sessionEnded
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, auth.ErrTooManyStreams):
				last = tooManyStreams
			case !errors.Is(cause, auth.ErrSessionRevoked) && !errors.Is(cause, auth.ErrSessionExpired):
				return
			}
			rc := http.NewResponseController(c.Response())
			if rc.SetWriteDeadline(time.Now().Add(2*time.Second)) == nil {
				_, _ = c.Response().Write([]byte(last))
				_ = rc.Flush()
				_ = rc.SetWriteDeadline(time.Time{})
			}
		}()
	}
	h.deps.Events.ServeHTTP(c.Response(), req)
	return nil
}
