// Package webhook delivers outbox messages as HTTP POSTs signed the
// Standard Webhooks way (https://www.standardwebhooks.com): webhook-id is
// the message id, so every attempt of one message carries the same id and
// the receiver can dedupe; webhook-timestamp is the attempt's time in unix
// seconds; webhook-signature holds one "v1,<base64 HMAC-SHA256>" entry per
// signing secret. Verify implements the receiving side of the same scheme.
package webhook

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/destination"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultUserAgent = "Switchyard-Webhook/1"
	// DefaultConnections is Config.Connections when zero: the
	// destinations table's default concurrency.
	DefaultConnections = 16
)

// Config configures a Destination. Only URL and one secret are required.
type Config struct {
	// URL is the absolute http or https URL every message is POSTed to.
	URL string
	// Secret is the signing secret, "whsec_<base64 key>".
	Secret string
	// Secrets are further signing secrets, for rotation: each request
	// carries one signature per secret (Secret first), so the receiver
	// can switch keys without a window of rejected messages.
	Secrets []string
	// PermanentStatuses, when not nil, are the response statuses that
	// make a failure permanent (the message goes straight to dead); every
	// other non-2xx, non-3xx status is retried. An empty, non-nil list
	// makes none permanent. Nil: destination.PermanentStatus.
	PermanentStatuses []int
	// Timeout bounds one delivery: connecting, sending, and reading the
	// response. Default DefaultTimeout (10 s).
	Timeout time.Duration
	// Connections is the most deliveries the caller has in flight at once
	// (a destination's concurrency): the default client keeps as many
	// connections idle between them, so that none is closed after its
	// request only to be opened again for the next. Default
	// DefaultConnections. A Client of the caller's keeps its own limits.
	Connections int
	// Client sends the requests. Default: a client of its own with dial,
	// TLS-handshake and idle-connection limits and no proxy. Whatever the
	// client, redirects are never followed: New uses a shallow copy of it
	// whose CheckRedirect stops at the first response.
	Client *http.Client
	// Headers are static headers sent with every request. Message headers
	// override them; neither can override Content-Type or the webhook-*
	// headers.
	Headers map[string]string
	// UserAgent is sent as User-Agent unless Headers or the message set
	// one. Default DefaultUserAgent.
	UserAgent string
	// Now is the clock for webhook-timestamp. Default time.Now.
	Now func() time.Time
}

// Destination POSTs messages to one webhook endpoint. It is safe for
// concurrent use and holds no state between deliveries beyond the
// client's idle connections and its keys' HMAC states, kept for reuse.
type Destination struct {
	url       string    // validated absolute http(s) URL
	display   string    // url without userinfo and query, for error texts
	signers   []*signer // one per secret, Secret first
	permanent func(code int) bool
	timeout   time.Duration
	client    *http.Client
	headers   map[string]string
	userAgent string
	now       func() time.Time
}

// New validates cfg and returns a Destination. It fails if the URL is not
// an absolute http or https URL, if no secret is given, if a secret does
// not decode, if the timeout is negative, or if a static header is
// malformed.
func New(cfg Config) (*Destination, error) {
	u, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	keys, err := decodeSecrets(cfg.Secret, cfg.Secrets)
	if err != nil {
		return nil, err
	}
	signers := make([]*signer, len(keys))
	for i, key := range keys {
		signers[i] = newSigner(key)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("webhook: negative timeout %s", cfg.Timeout)
	}
	if cfg.Connections < 0 {
		return nil, fmt.Errorf("webhook: negative connections %d", cfg.Connections)
	}
	for name, value := range cfg.Headers {
		if err := checkHeader(name, value); err != nil {
			return nil, fmt.Errorf("webhook: static headers: %w", err)
		}
	}
	d := &Destination{
		url:       u.String(),
		display:   displayURL(u),
		signers:   signers,
		timeout:   cmp.Or(cfg.Timeout, DefaultTimeout),
		client:    noRedirects(cfg.Client, cmp.Or(cfg.Connections, DefaultConnections)),
		headers:   cfg.Headers,
		userAgent: cmp.Or(cfg.UserAgent, DefaultUserAgent),
		now:       cfg.Now,
		permanent: permanentPolicy(cfg.PermanentStatuses),
	}
	if d.now == nil {
		d.now = time.Now
	}
	return d, nil
}

// permanentPolicy is the classification of Config.PermanentStatuses.
func permanentPolicy(statuses []int) func(int) bool {
	if statuses == nil {
		return destination.PermanentStatus
	}
	set := slices.Clone(statuses)
	return func(code int) bool { return slices.Contains(set, code) }
}

// CloseIdleConnections closes the client's idle connections, for a
// graceful stop. The Destination stays usable.
func (d *Destination) CloseIdleConnections() { d.client.CloseIdleConnections() }

// parseURL accepts only absolute http and https URLs with a host.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("webhook: invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("webhook: URL %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("webhook: URL %q: no host", raw)
	}
	return u, nil
}

// displayURL drops userinfo and query, which may hold credentials, so
// that error texts (stored and shown to operators) never carry them.
func displayURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment = nil, "", false, ""
	return c.String()
}

// decodeSecrets decodes secret and then secrets; at least one is needed.
func decodeSecrets(secret string, secrets []string) ([][]byte, error) {
	all := append([]string{secret}, secrets...)
	if secret == "" {
		all = all[1:]
	}
	if len(all) == 0 {
		return nil, errors.New("webhook: no signing secret")
	}
	keys := make([][]byte, 0, len(all))
	for i, s := range all {
		key, err := decodeSecret(s)
		if err != nil {
			return nil, fmt.Errorf("webhook: secret %d: %w", i+1, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// noRedirects returns a client that hands back the first response instead
// of following a redirect: a webhook that moved is a configuration error
// to fix, and following it would resend the signed payload elsewhere. A
// nil c is the default client, keeping connections idle.
func noRedirects(c *http.Client, connections int) *http.Client {
	if c == nil {
		c = defaultClient(connections)
	} else {
		copied := *c
		c = &copied
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// defaultClient bounds every phase that Deliver's context does not make
// obvious, and keeps up to connections idle for reuse (one destination is
// one host). With fewer than the deliveries in flight, every request past
// them would close its connection when it ends, and the next would open
// one again: a TCP handshake (and a TLS one) per request, and the closed
// sockets left waiting in TIME_WAIT.
func defaultClient(connections int) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           connections,
		MaxIdleConnsPerHost:    connections,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}}
}
