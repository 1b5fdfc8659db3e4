// Package webhook delivers outbox messages as HTTP POSTs signed the
// Standard Webhooks way (https://www.standardwebhooks.com): webhook-id is
// the message id, so every attempt of one message carries the same id and
// the receiver can dedupe; webhook-timestamp is the attempt's time in unix
// seconds; webhook-signature holds one "v1,<base64 HMAC-SHA256>" entry per
// signing secret. Verify implements the receiving side of the same scheme.
//
// Requests go over HTTP/1.1 keep-alive connections that a Destination
// keeps itself (conn.go), each written and answered in the delivering
// goroutine: no proxy, no HTTP/2, redirects never followed.
package webhook

import (
	"cmp"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

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
	// (a destination's concurrency): as many connections are kept open
	// between them, so that none is closed after its request only to be
	// opened again for the next. Default DefaultConnections.
	Connections int
	// TLS configures https connections. Default: the system's roots,
	// TLS 1.2 or later. Its ServerName defaults to the URL's host.
	TLS *tls.Config
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

// Destination POSTs messages to one webhook endpoint, over HTTP/1.1
// connections of its own (pool). It is safe for concurrent use and holds
// no state between deliveries beyond its idle connections and its keys'
// HMAC states, kept for reuse.
type Destination struct {
	display   string    // the URL without userinfo and query, for error texts
	signers   []*signer // one per secret, Secret first
	permanent func(code int) bool
	timeout   time.Duration
	pool      *pool
	// requestLine is the request's first line and its Host header.
	requestLine string
	// fields are the headers every request carries before the
	// message's own: Authorization from the URL's userinfo, User-Agent
	// and the static headers, sorted by name.
	fields []field
	now    func() time.Time
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
		display:     displayURL(u),
		signers:     signers,
		timeout:     cmp.Or(cfg.Timeout, DefaultTimeout),
		pool:        newPool(u, cfg.TLS, cmp.Or(cfg.Connections, DefaultConnections)),
		requestLine: "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\n",
		fields:      staticFields(u, cfg),
		now:         cfg.Now,
		permanent:   permanentPolicy(cfg.PermanentStatuses),
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

// staticFields are the headers of every request before the message's own:
// Authorization from the URL's userinfo (as net/http's client sends it)
// unless a static header sets one, User-Agent, and the static headers
// other than the reserved ones, sorted by name.
func staticFields(u *url.URL, cfg Config) []field {
	set := map[string]string{"User-Agent": cmp.Or(cfg.UserAgent, DefaultUserAgent)}
	if u.User != nil {
		password, _ := u.User.Password()
		set["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+password))
	}
	for name, value := range cfg.Headers {
		if name = textproto.CanonicalMIMEHeaderKey(name); !reserved[name] {
			set[name] = value
		}
	}
	fields := make([]field, 0, len(set))
	for name, value := range set {
		fields = append(fields, field{name, value})
	}
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.name, b.name) })
	return fields
}

// CloseIdleConnections closes the destination's idle connections, for a
// graceful stop or when a new destination replaces it. It stays usable,
// but keeps no connection open after a delivery from then on.
func (d *Destination) CloseIdleConnections() { d.pool.closeIdle() }

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
	if u.Host, err = asciiHost(u); err != nil {
		return nil, fmt.Errorf("webhook: URL %q: host: %w", raw, err)
	}
	return u, nil
}

// asciiHost is u's host with an internationalised name in its ASCII form
// (punycode), which the Host header and the name's lookup need, as
// net/http's client converts it.
func asciiHost(u *url.URL) (string, error) {
	name := u.Hostname()
	if isASCII(name) {
		return u.Host, nil
	}
	name, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "", err
	}
	if port := u.Port(); port != "" {
		return net.JoinHostPort(name, port), nil
	}
	return name, nil
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
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
