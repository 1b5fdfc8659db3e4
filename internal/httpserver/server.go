// Package httpserver builds the console's echo instance with the middleware
// every route shares (panic recovery, request logs, metrics, security headers
// with a per-request CSP nonce) and runs it with a graceful shutdown. Routes
// and handlers live elsewhere; this package knows none of them.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures New.
type Config struct {
	Logger *slog.Logger
	// Registerer receives the HTTP metrics.
	Registerer prometheus.Registerer
	// AllowedHosts are the host names requests may address (the Host
	// header); others get 421. Empty: any. A console that signs requests
	// in without a session (demo mode) must set it, against DNS
	// rebinding; with sessions, a rebinding page gets no cookie.
	AllowedHosts []string
	// CSRF, when set, checks every unsafe method (see CSRFConfig).
	CSRF *CSRFConfig
	// RenderError writes the HTML body for a failed request; see
	// ErrorHandler. Nil: JSON bodies only.
	RenderError ErrorRenderer
	// BodyLimit returns the largest request body a route takes, in bytes
	// (it runs after routing: c.Path() is the route); nil or 0:
	// FormMaxBody. Larger bodies get 413, multipart ones 415.
	BodyLimit func(c echo.Context) int64
	// Streaming reports the routes that stream for as long as the client
	// stays (Server-Sent Events, WebSockets): the server's read and write
	// deadlines do not apply to them, and they bound each write
	// themselves. Nil: none.
	Streaming func(c echo.Context) bool
	// ForPrograms reports the routes that answer programs only (JSON,
	// never a page, such as the inbox's receiver): their answers carry a
	// policy that allows nothing and no script nonce. Nil: none.
	ForPrograms func(c echo.Context) bool
	// TrustedProxies are the networks of the reverse proxies in front of
	// the console, whose X-Forwarded-For is believed (clientip.go).
	// Empty: none; the client is the peer.
	TrustedProxies []*net.IPNet
}

// ServeConfig configures Run.
type ServeConfig struct {
	Logger *slog.Logger
	// ShutdownTimeout is how long requests in flight may take to finish
	// once the context ends.
	ShutdownTimeout time.Duration
	Timeouts        Timeouts
	Conns           ConnLimits
}

// New returns an echo instance with the shared middleware installed.
func New(cfg Config) (*echo.Echo, error) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(io.Discard) // echo's own logger is unused: we log with slog
	metrics, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	e.HTTPErrorHandler = ErrorHandler(cfg.Logger, cfg.RenderError)
	// The peer's address, or X-Forwarded-For from a trusted proxy only:
	// logs, the audit trail and sign-in delays must not be spoofable.
	e.IPExtractor = clientIP(cfg.TrustedProxies)
	e.Use(
		securityHeaders(cfg.ForPrograms),
		requestLog(cfg.Logger),
		metrics.middleware,
		middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true}),
		// Before anything reads a body (the CSRF check reads forms).
		guardBody(cfg.BodyLimit, cfg.Streaming),
	)
	if len(cfg.AllowedHosts) > 0 {
		e.Use(allowHosts(cfg.AllowedHosts))
	}
	if cfg.CSRF != nil {
		e.Use(csrf(*cfg.CSRF, cfg.Logger, metrics.csrfRefused))
	}
	return e, nil
}

// Run serves h on ln until ctx is cancelled, then shuts down gracefully:
// it stops accepting, lets requests in flight finish within the shutdown
// timeout, then closes what remains. It returns nil after a clean shutdown.
//
// Every request must arrive within cfg.Timeouts.Read and be answered
// within cfg.Timeouts.Write (a handler that streams lifts both through an
// http.ResponseController, as New's Streaming routes do), and connections
// over cfg.Conns are closed as soon as they are accepted.
func Run(ctx context.Context, h http.Handler, ln net.Listener, cfg ServeConfig) error {
	t := cfg.Timeouts.withDefaults()
	srv := &http.Server{
		Handler:           h,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		MaxHeaderBytes:    64 << 10,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
	timeout := cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(LimitListener(ln, cfg.Conns, cfg.Logger)) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = errors.Join(fmt.Errorf("http shutdown: requests still running after %v", timeout), srv.Close())
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
