package httpserver

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ConnLimits caps the connections open at once. Zero fields take their
// defaults (DefaultConnLimits).
type ConnLimits struct {
	// PerAddress caps one client address's connections. Behind a reverse
	// proxy every client shares the proxy's address: raise it to Total.
	PerAddress int
	// Total caps all connections.
	Total int
}

// DefaultConnLimits are the caps of a zero ConnLimits: enough for every
// tab of a team's browsers (six connections and a live stream each), far
// below the process's file descriptors.
var DefaultConnLimits = ConnLimits{PerAddress: 128, Total: 2048}

func (l ConnLimits) withDefaults() ConnLimits {
	if l.PerAddress <= 0 {
		l.PerAddress = DefaultConnLimits.PerAddress
	}
	if l.Total <= 0 {
		l.Total = DefaultConnLimits.Total
	}
	return l
}

// limitListener closes at once every accepted connection over its caps,
// so that one client cannot take every goroutine and file descriptor (a
// connection waiting in the backlog instead would still hold one, and
// every client behind it would wait).
type limitListener struct {
	net.Listener
	limits ConnLimits
	logger *slog.Logger
	sample *rate.Sometimes

	mu     sync.Mutex
	open   int            // guarded by mu
	byAddr map[string]int // guarded by mu: open connections by client address
}

// LimitListener wraps ln with the caps of limits.
func LimitListener(ln net.Listener, limits ConnLimits, logger *slog.Logger) net.Listener {
	return &limitListener{
		Listener: ln, limits: limits.withDefaults(), logger: logger,
		sample: &rate.Sometimes{First: 10, Interval: time.Minute}, byAddr: map[string]int{},
	}
}

// Accept returns the next connection within the caps; those over them are
// closed and never returned.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(conn)
		if l.take(addr) {
			return &limitedConn{Conn: conn, release: func() { l.release(addr) }}, nil
		}
		_ = conn.Close()
		l.sample.Do(func() {
			l.logger.Warn("connection refused: too many open", slog.String("remote_ip", addr),
				slog.Int("per_address", l.limits.PerAddress), slog.Int("total", l.limits.Total))
		})
	}
}

func (l *limitListener) take(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.limits.Total || l.byAddr[addr] >= l.limits.PerAddress {
		return false
	}
	l.open++
	l.byAddr[addr]++
	return true
}

func (l *limitListener) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

func clientAddr(conn net.Conn) string {
	addr := conn.RemoteAddr()
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// limitedConn gives its slot back when closed, once.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
