// Package jetstream delivers outbox messages to NATS JetStream.
//
// Each message is published to the subject SubjectPrefix + "." + topic
// with the header Nats-Msg-Id set to the message id, and Deliver succeeds
// only once a stream has acknowledged the publish (PubAck). Because every
// attempt of a message carries the same id, the stream's duplicate window
// (StreamConfig.Duplicates, two minutes by default) drops a republish of a
// message it already stored, so a retry after a lost PubAck does not store
// it twice. A retry later than that window does: consumers that must see
// each message once should still dedupe on Nats-Msg-Id.
package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultURL            = nats.DefaultURL // nats://127.0.0.1:4222
	DefaultTimeout        = 5 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultName           = "switchyard"
)

// Config configures a Destination. Only SubjectPrefix is required.
type Config struct {
	// URL is the NATS server URL, or a comma-separated list of them.
	// Default DefaultURL.
	URL string
	// SubjectPrefix starts every subject: a message of topic T is
	// published to SubjectPrefix + "." + T, so prefix "outbox" and topic
	// "order.created" give "outbox.order.created". A stream must capture
	// these subjects (for example with the subject filter "outbox.>").
	// Prefix and topic must make a valid literal subject: no empty tokens,
	// no whitespace, no wildcard tokens ("*", ">").
	SubjectPrefix string
	// Timeout bounds one delivery, from publish to PubAck. Default
	// DefaultTimeout.
	Timeout time.Duration
	// ConnectTimeout bounds the connection New makes. Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Name names the connection in the server's monitoring. Default
	// DefaultName.
	Name string
	// Options are further connection options (credentials, TLS, reconnect
	// policy), applied after the ones derived from the fields above.
	Options []nats.Option
}

// Destination publishes messages to JetStream over one connection. It is
// safe for concurrent use. Close it when done.
type Destination struct {
	nc      *nats.Conn
	js      natsjs.JetStream
	prefix  string
	timeout time.Duration
}

// New validates cfg, connects and checks that the server offers
// JetStream to this account. ctx bounds the whole of it; an error means
// nothing is left open.
func New(ctx context.Context, cfg Config) (*Destination, error) {
	cfg.URL = cmp.Or(cfg.URL, DefaultURL)
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, DefaultConnectTimeout)
	if err := checkSubject(cfg.SubjectPrefix); err != nil {
		return nil, fmt.Errorf("jetstream: subject prefix %q: %w", cfg.SubjectPrefix, err)
	}
	if cfg.Timeout < 0 || cfg.ConnectTimeout < 0 {
		return nil, errors.New("jetstream: negative timeout")
	}
	nc, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	js, err := natsjs.New(nc)
	if err == nil {
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %s: JetStream unavailable: %w", redact(cfg.URL), err)
	}
	return &Destination{nc: nc, js: js, prefix: cfg.SubjectPrefix, timeout: cfg.Timeout}, nil
}

// connect dials cfg.URL within ctx and ConnectTimeout. nats.Connect takes
// no context, so it runs aside; if ctx ends first, the late connection is
// closed when it arrives.
func connect(ctx context.Context, cfg Config) (*nats.Conn, error) {
	timeout := cfg.ConnectTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if err := ctx.Err(); err != nil || timeout <= 0 {
		return nil, fmt.Errorf("jetstream: connect to %s: %w", redact(cfg.URL), cmp.Or(err, context.DeadlineExceeded))
	}
	opts := append([]nats.Option{nats.Name(cfg.Name), nats.Timeout(timeout)}, cfg.Options...)
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(cfg.URL, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("jetstream: connect to %s: %w", redact(cfg.URL), r.err)
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("jetstream: connect to %s: %w", redact(cfg.URL), ctx.Err())
	}
}

// Close closes the connection. Deliveries still running fail with a
// retryable error. Close is idempotent.
func (d *Destination) Close() { d.nc.Close() }

// redact hides the credentials in a comma-separated list of server URLs:
// passwords, and a user without password, which NATS takes as a token.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, hasPassword := u.User.Password(); !hasPassword {
			u.User = url.User("xxxxx")
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}
