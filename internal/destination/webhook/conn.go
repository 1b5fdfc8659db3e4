package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
)

const (
	// idleTimeout closes a connection that no delivery used for this long.
	idleTimeout = 90 * time.Second
	// checkIdleAfter is how long a connection may sit idle before a
	// delivery checks, before sending on it, that the receiver has not
	// closed it (many close keep-alive connections after a few seconds).
	// Busier connections are not checked: one the receiver closed anyway
	// is retried once on a new connection (see roundTrip).
	checkIdleAfter = time.Second
	// maxResponseHeaderBytes bounds a response's status line and headers.
	maxResponseHeaderBytes = 64 << 10
	dialTimeout            = 5 * time.Second
	tlsHandshakeTimeout    = 5 * time.Second
)

// errResponseTooLarge ends a response that is larger than a delivery ever
// reads of it (its headers past maxResponseHeaderBytes, or its body past
// what readBody reads and drains).
var errResponseTooLarge = errors.New("response too large")

// pool is a destination's HTTP/1.1 client: the connections it keeps open
// between deliveries, the most recently used first, and the dial and TLS
// settings of its one host.
//
// Each delivery writes its request and reads the answer on one connection
// in its own goroutine. net/http's client hands every request to a write
// loop and every answer back from a read loop, two goroutines per
// connection; without those hand-offs a webhook to a receiver on the same
// two cores cost both sides together about a third less CPU (issue 17,
// target 4: "A webhook client of its own" in BENCHMARKS.md). The price is
// what the webhooks do not need: no proxy (the default client had none),
// no HTTP/2, no redirects (never followed anyway).
type pool struct {
	addr   string      // host:port to dial
	tls    *tls.Config // nil for http
	dialer net.Dialer
	max    int // most idle connections kept

	mu      sync.Mutex
	idle    []*conn // the most recently used last
	sweep   *time.Timer
	retired bool // CloseIdleConnections ran: no connection is kept any more
}

// conn is one connection of a pool.
type conn struct {
	net.Conn
	tcp       net.Conn // the TCP connection under TLS, or Conn itself
	r         *bufio.Reader
	w         *bufio.Writer
	limit     limitReader // under r: a response's byte budget
	idleSince time.Time
	reused    bool
}

// newPool makes the client of u's host, for u's scheme; cfg, when not
// nil, configures TLS (its ServerName and NextProtos are set here).
func newPool(u *url.URL, cfg *tls.Config, connections int) *pool {
	p := &pool{dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}, max: connections}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p.addr = net.JoinHostPort(u.Hostname(), port)
	if u.Scheme == "https" {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		} else {
			cfg = cfg.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		p.tls = cfg
	}
	return p
}

// get returns an idle connection, or a new one when none is left that was
// used within idleTimeout and, when idle for longer than checkIdleAfter,
// is still open.
func (p *pool) get(ctx context.Context) (*conn, error) {
	now := time.Now()
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return p.dial(ctx)
		}
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		idle := now.Sub(c.idleSince)
		if idle < checkIdleAfter || (idle < idleTimeout && c.stillOpen()) {
			c.reused = true
			return c, nil
		}
		_ = c.Close()
	}
}

// dial opens a connection, and for https makes the TLS handshake.
func (p *pool) dial(ctx context.Context) (*conn, error) {
	tcp, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: tcp, tcp: tcp}
	if p.tls != nil {
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
		defer cancel()
		tc := tls.Client(tcp, p.tls)
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = tcp.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		c.Conn = tc
	}
	c.limit.r = c.Conn
	c.r = bufio.NewReader(&c.limit)
	c.w = bufio.NewWriter(c.Conn)
	return c, nil
}

// put keeps c for the next delivery, or closes it when the pool is full
// or retired.
func (p *pool) put(c *conn) {
	c.idleSince = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired || len(p.idle) >= p.max {
		_ = c.Close()
		return
	}
	p.idle = append(p.idle, c)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(idleTimeout, p.closeExpired)
	}
}

// closeExpired closes the connections idle for idleTimeout, so that a
// destination gone quiet does not hold its sockets open, and looks again
// later while any is left.
func (p *pool) closeExpired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	cut := time.Now().Add(-idleTimeout)
	kept := p.idle[:0]
	for _, c := range p.idle {
		if c.idleSince.After(cut) {
			kept = append(kept, c)
		} else {
			_ = c.Close()
		}
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	if len(p.idle) > 0 {
		p.sweep.Reset(idleTimeout)
	} else {
		p.sweep = nil
	}
}

// closeIdle closes every idle connection and keeps none from then on:
// the destination is being replaced. Deliveries still in flight, or made
// later, each close their connection when done.
func (p *pool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = true
	for _, c := range p.idle {
		_ = c.Close()
	}
	p.idle = nil
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
}

// roundTrip sends the request that write writes and returns the answer's
// status, its body's first bytes (readBody) and its Location header. A
// connection reused from the pool that fails before any answer arrived (the
// receiver closed it while it was idle) is dropped and the request sent
// once more on a new connection: the receiver dedupes by webhook-id, and
// the dispatcher would send it again anyway.
func (p *pool) roundTrip(ctx context.Context, write func(*bufio.Writer) error) (answer, error) {
	c, err := p.get(ctx)
	for {
		if err != nil {
			return answer{}, ioError(ctx, err)
		}
		a, reusable, sendErr := c.exchange(ctx, write)
		if sendErr == nil {
			if reusable {
				p.put(c)
			} else {
				_ = c.Close()
			}
			return a, nil
		}
		_ = c.Close()
		if !c.reused || ctx.Err() != nil || !closedUnanswered(sendErr) {
			return answer{}, ioError(ctx, sendErr)
		}
		c, err = p.dial(ctx)
	}
}

// answer is what a delivery keeps of a response.
type answer struct {
	status   int
	body     []byte
	location string
}

// exchange writes one request on c and reads its answer, within ctx.
// reusable says whether the next request may be sent on c: the answer was
// read to its end, nothing followed it, neither side asked to close and
// ctx did not end.
func (c *conn) exchange(ctx context.Context, write func(*bufio.Writer) error) (_ answer, reusable bool, _ error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	} else {
		_ = c.SetDeadline(time.Time{})
	}
	// A cancelled ctx ends a read or write at once; the connection is
	// not reused after it.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	c.limit.n = maxResponseHeaderBytes
	if err := write(c.w); err != nil {
		stop()
		return answer{}, false, err
	}
	if err := c.w.Flush(); err != nil {
		stop()
		return answer{}, false, err
	}
	// The answer's first byte, waited for on its own: an end of the
	// connection before it is a receiver that closed it unanswered (see
	// closedUnanswered), which ReadResponse would not tell from an answer
	// cut short.
	if _, err := c.r.Peek(1); err != nil {
		stop()
		return answer{}, false, err
	}
	var resp *http.Response
	for {
		var err error
		if resp, err = http.ReadResponse(c.r, nil); err != nil {
			stop()
			return answer{}, false, err
		}
		// An informational answer (103 Early Hints, say) comes before
		// the final one; 101 would switch protocols and ends here.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	// The body may be read past the headers' budget, as far as readBody
	// reads and drains it, and bufio's read-ahead beyond that.
	c.limit.n = int64(c.r.Size()) + bodyBudget
	body, complete := readBody(resp.Body)
	stopped := stop()
	a := answer{status: resp.StatusCode, body: body, location: resp.Header.Get("Location")}
	// Bytes already past the answer were sent unasked: the next request
	// would read them as its answer.
	unasked := c.r.Buffered() > 0
	return a, complete && stopped && !unasked && !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols, nil
}

// closedUnanswered reports whether err is a connection ended by the
// receiver before any answer: nothing read at all, a reset or a broken
// pipe. A reset can also cut an answer short; sending again then is what
// the dispatcher's retry of the failed delivery would do, with the same
// webhook-id.
func closedUnanswered(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// ioError reports a failed dial, write or read: as ctx's error when ctx
// ended (the connection's deadline is ctx's, and the deadline's own error
// may come a moment before ctx's timer), or as it is.
func ioError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (%v)", ctxErr, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

// limitReader reads from r until n bytes are read, then fails with
// errResponseTooLarge.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}
