package chaos

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// proxyMode is what a proxy does to the connections through it.
type proxyMode int

const (
	passThrough proxyMode = iota
	// blackHole accepts and holds new connections and stops forwarding on
	// open ones: packets vanish, nothing is refused (a partition).
	blackHole
	// slow delays every chunk forwarded.
	slow
)

// proxy forwards TCP connections from a loopback port to upstream, and
// injects faults on command: latency, resets of every open connection,
// black holes. Safe for concurrent use.
type proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	mode     proxyMode
	delay    time.Duration
	changed  chan struct{} // closed and replaced at every change of mode
	conns    map[net.Conn]struct{}
}

func newProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr is the proxy's loopback address.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting and closes every connection.
func (p *proxy) Close() {
	_ = p.ln.Close()
	p.reset()
}

// setUpstream points new connections at addr (after a PostgreSQL restart
// on another port).
func (p *proxy) setUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
}

func (p *proxy) set(mode proxyMode, delay time.Duration) {
	p.mu.Lock()
	p.mode, p.delay = mode, delay
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// reset closes every open connection: each side sees its peer vanish.
func (p *proxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) state() (proxyMode, time.Duration, <-chan struct{}, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed, p.upstream
}

func (p *proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

// awaitOpen waits while the proxy black-holes, up to a minute.
func (p *proxy) awaitOpen() {
	deadline := time.After(time.Minute)
	for {
		mode, _, changed, _ := p.state()
		if mode != blackHole {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			return
		}
	}
}

func (p *proxy) serve(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	defer c.Close()
	p.awaitOpen()
	_, _, _, upstream := p.state()
	u, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return
	}
	p.track(u, true)
	defer p.track(u, false)
	defer u.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Either direction ending ends both: closing unblocks the other read.
	go func() { p.pipe(ctx, c, u); cancel(); _ = c.Close(); _ = u.Close() }()
	p.pipe(ctx, u, c)
	_ = u.Close()
}

// pipe copies from src to dst, holding each chunk while the proxy
// black-holes and delaying it while it is slow.
func (p *proxy) pipe(ctx context.Context, dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.awaitOpen()
			if mode, delay, _, _ := p.state(); mode == slow {
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
