package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/internal/httpserver"
)

// webConfig is how the HTTP server treats its clients.
type webConfig struct {
	timeouts httpserver.Timeouts
	conns    httpserver.ConnLimits
	// metricsListen serves /metrics on an address of its own ("": none).
	metricsListen string
	// metricsToken guards /metrics on the console's address ("": public on
	// loopback, not served elsewhere).
	metricsToken string
}

// parseWeb reads the HTTP server's settings.
func parseWeb(values map[string]*string) (webConfig, error) {
	var w webConfig
	w.timeouts.ReadHeader = httpserver.DefaultTimeouts.ReadHeader
	for _, d := range []struct {
		flag string
		to   *time.Duration
	}{{"read-timeout", &w.timeouts.Read}, {"write-timeout", &w.timeouts.Write}, {"idle-timeout", &w.timeouts.Idle}} {
		v, err := time.ParseDuration(*values[d.flag])
		if err != nil || v < time.Second {
			return w, fmt.Errorf("invalid --%s %q: want a duration of 1s or more", d.flag, *values[d.flag])
		}
		*d.to = v
	}
	for _, n := range []struct {
		flag string
		to   *int
	}{{"max-conns-per-address", &w.conns.PerAddress}, {"max-conns", &w.conns.Total}} {
		v, err := strconv.Atoi(*values[n.flag])
		if err != nil || v < 1 {
			return w, fmt.Errorf("invalid --%s %q: want a number, 1 or more", n.flag, *values[n.flag])
		}
		*n.to = v
	}
	if w.conns.PerAddress > w.conns.Total {
		return w, fmt.Errorf("invalid --max-conns-per-address %d: more than --max-conns %d", w.conns.PerAddress, w.conns.Total)
	}
	w.metricsListen, w.metricsToken = *values["metrics-listen"], *values["metrics-token"]
	return w, nil
}
