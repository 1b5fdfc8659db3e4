package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
)

// serveConfig is how httpserver.Run treats the console's clients.
func (cfg config) serveConfig(logger *slog.Logger) httpserver.ServeConfig {
	return httpserver.ServeConfig{
		Logger: logger, ShutdownTimeout: cfg.shutdownTimeout,
		Timeouts: cfg.web.timeouts, Conns: cfg.web.conns,
	}
}

// isLoopbackHost reports whether host (of a listen address) is loopback.
func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// metricsHidden reports whether the console's own address answers
// /metrics 404: when they are served on an address of their own (behind
// the token there, if one is set), or when the console listens beyond
// loopback and no token guards them.
func (cfg config) metricsHidden() bool {
	if cfg.web.metricsListen != "" {
		return true
	}
	host, _, err := net.SplitHostPort(cfg.listen)
	return cfg.web.metricsToken == "" && (err != nil || !isLoopbackHost(host))
}

// serveMetrics serves /metrics on --metrics-listen, if set, until ctx ends
// (stop waits for it), and says where the metrics are.
func serveMetrics(ctx context.Context, cfg config, loopback bool, registry *prometheus.Registry, logger *slog.Logger) (stop func(), err error) {
	if cfg.web.metricsListen == "" {
		if !loopback && cfg.web.metricsToken == "" {
			logger.Warn("/metrics is not served: the console listens beyond loopback; set --metrics-token or --metrics-listen")
		}
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.web.metricsListen)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", cfg.web.metricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", console.MetricsHandler(registry, cfg.web.metricsToken))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := httpserver.Run(ctx, mux, ln, cfg.serveConfig(logger)); err != nil {
			logger.Error("metrics server stopped", slog.Any("error", err))
		}
	}()
	logger.Info("metrics listening", slog.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return func() { cancel(); <-done }, nil
}
