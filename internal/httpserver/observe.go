package httpserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// quietRoutes are polled by machines; their successful requests are logged at
// debug level only.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// requestLog writes one slog line per request, after the error handler has
// set the final status.
func requestLog(logger *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogMethod: true, LogURIPath: true, LogRoutePath: true, LogStatus: true,
		LogLatency: true, LogRemoteIP: true, LogResponseSize: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			switch {
			case v.Status >= 500:
				level = slog.LevelError
			case quietRoutes[v.RoutePath] && v.Status < 400:
				level = slog.LevelDebug
			}
			if !logger.Enabled(c.Request().Context(), level) {
				return nil // the attributes would be built for nothing: every request comes here
			}
			logger.LogAttrs(c.Request().Context(), level, "http request",
				slog.Group("http",
					slog.String("method", v.Method),
					slog.String("path", v.URIPath),
					slog.String("route", v.RoutePath),
					slog.Int("status", v.Status),
					slog.Duration("latency", v.Latency),
					slog.Int64("bytes", v.ResponseSize),
					slog.String("remote_ip", v.RemoteIP),
				))
			return nil
		},
	})
}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// csrfRefused counts CSRF refusals (csrf.go), which are logged and
	// counted rather than audited.
	csrfRefused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests served, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "switchyard", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to serve an HTTP request (until the handler returns; streams count their whole life).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		csrfRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "http", Name: "csrf_refused_total",
			Help: "Unsafe requests refused by the CSRF check, by reason: sec_fetch_site (the browser said another site sent it) or token (missing or wrong).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.csrfRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

// middleware labels by route template, never by raw path, so that the number
// of series stays bounded whatever URLs clients send.
func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // let the error handler set the status we record
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		method := knownMethod(c.Request().Method)
		m.requests.WithLabelValues(route, method, strconv.Itoa(c.Response().Status)).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		return nil
	}
}

// knownMethod bounds the method label: any client can send any method name,
// and each would otherwise become a new time series.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "OTHER"
}
