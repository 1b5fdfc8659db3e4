package httpserver

import (
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// LoopbackHosts are the names a console listening on loopback answers to.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// allowHosts answers 421 to a request whose Host header names none of
// hosts. A console on loopback is otherwise reachable from any web page
// through DNS rebinding: the attacker's name resolves to 127.0.0.1, and the
// browser sends the attacker's name as Host.
func allowHosts(hosts []string) echo.MiddlewareFunc {
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		allowed[strings.ToLower(h)] = true
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			host := c.Request().Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.Trim(strings.ToLower(host), "[]")
			if !allowed[host] {
				return echo.NewHTTPError(http.StatusMisdirectedRequest, "This console does not answer to that host name.")
			}
			return next(c)
		}
	}
}
