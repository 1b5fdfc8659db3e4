package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
)

// ErrorRenderer writes the body of an error response whose status and safe
// message are decided.
type ErrorRenderer func(c echo.Context, status int, message string) error

// ErrorHandler is the one place that turns a handler's error into a
// response. An *action.Refusal gets its kind's status (RefusalStatus) and
// its message; an *echo.HTTPError keeps its status and its message
// (handlers make them safe to show); anything else is a 500 whose cause is
// logged here, once, and never shown. JSON clients get {"error": message}.
//
// A request the client abandoned (its context canceled while the handler
// was still working: a closed tab, a navigation, htmx cancelling a
// superseded request) is no server fault: it is recorded with status
// StatusClientClosed, logged at info by the request log, counted under
// that code by the metrics (never as a 5xx), and nothing is written to
// the gone client.
func ErrorHandler(logger *slog.Logger, render ErrorRenderer) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if clientClosed(c.Request(), err) {
			if !c.Response().Committed {
				c.Response().Status = StatusClientClosed
			}
			return
		}
		if c.Response().Committed {
			// A stream that fails halfway: the status is sent, the cause
			// still deserves its log line.
			logger.WarnContext(c.Request().Context(), "request failed after the response started",
				slog.String("path", c.Request().URL.Path), slog.Any("error", err))
			return
		}
		status, message := http.StatusInternalServerError, "Something went wrong on our side; it has been logged."
		var he *echo.HTTPError
		if r := action.AsRefusal(err); r != nil {
			status, message = RefusalStatus(r.Kind), r.Message
		} else if errors.As(err, &he) {
			status = he.Code
			message = http.StatusText(status)
			if m, ok := he.Message.(string); ok && m != "" {
				message = m
			}
		}
		if status >= 500 {
			logger.ErrorContext(c.Request().Context(), "request failed",
				slog.String("path", c.Request().URL.Path), slog.Any("error", err))
		}
		var werr error
		switch {
		case c.Request().Method == http.MethodHead:
			werr = c.NoContent(status)
		case wantsJSON(c.Request()) || render == nil:
			werr = c.JSON(status, map[string]string{"error": message})
		default:
			werr = render(c, status, message)
		}
		if werr != nil {
			logger.ErrorContext(c.Request().Context(), "write error response", slog.Any("error", werr))
			if !c.Response().Committed {
				// The error page itself failed before writing: a plain
				// body, never an empty 200.
				http.Error(c.Response(), message, status)
			}
		}
	}
}

// StatusClientClosed is the status recorded for a request whose client
// went away before the answer (nginx's 499 "client closed request"). It is
// never sent: there is nobody left to send it to.
const StatusClientClosed = 499

// clientClosed reports whether err is the cancellation of r's own context,
// which net/http cancels when the client closes the connection (or resets
// an HTTP/2 stream). A deadline (a query timeout) is not: that stays a
// server fault.
func clientClosed(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// RefusalStatus is the HTTP status of a refusal of kind k.
func RefusalStatus(k action.Kind) int {
	switch k {
	case action.KindNotFound:
		return http.StatusNotFound
	case action.KindConflict:
		return http.StatusConflict
	case action.KindInvalid:
		return http.StatusUnprocessableEntity
	case action.KindForbidden:
		return http.StatusForbidden
	case action.KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

func wantsJSON(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") ||
		strings.Contains(r.Header.Get("Accept"), "application/json") ||
		// A program that sent JSON (a webhook sender refused before
		// its handler ran) reads JSON back.
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
}
