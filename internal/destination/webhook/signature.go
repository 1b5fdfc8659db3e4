package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Standard Webhooks headers. net/http canonicalises them on the wire
// (Webhook-Id, ...); header names are case-insensitive.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts a Standard Webhooks secret: "whsec_" followed by the
// standard base64 encoding of the HMAC key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook-timestamp may lie from the
// receiver's clock, either way, when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// Errors returned by Verify (wrapped with detail); test them with errors.Is.
var (
	ErrInvalidSecret       = errors.New("webhook: invalid secret")
	ErrMissingHeaders      = errors.New("webhook: missing signature headers")
	ErrInvalidTimestamp    = errors.New("webhook: invalid timestamp")
	ErrTimestampTolerance  = errors.New("webhook: timestamp outside tolerance")
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
)

// decodeSecret returns the HMAC key of a "whsec_<base64>" secret. The
// prefix is optional, as in the reference libraries.
func decodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("%w: not whsec_<base64>: %v", ErrInvalidSecret, err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidSecret)
	}
	return key, nil
}

// signature returns the raw HMAC-SHA256 of "{id}.{timestamp}.{body}".
func signature(key []byte, id string, unix int64, body []byte) []byte {
	return sumSigned(hmac.New(sha256.New, key), id, unix, body, nil)
}

// sumSigned appends to b the MAC that h, a fresh or reset HMAC, gives
// "{id}.{timestamp}.{body}".
func sumSigned(h hash.Hash, id string, unix int64, body, b []byte) []byte {
	var digits [20]byte
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(digits[:0], unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(b)
}

// signatureEntry formats one entry of the webhook-signature header.
func signatureEntry(key []byte, id string, unix int64, body []byte) string {
	return formatEntry(signature(key, id, unix, body))
}

func formatEntry(mac []byte) string { return "v1," + base64.StdEncoding.EncodeToString(mac) }

// signer signs with one key and keeps its HMAC states for reuse: hmac.New
// hashes the key's two pads anew, and a Destination signs every delivery.
type signer struct{ states sync.Pool }

func newSigner(key []byte) *signer {
	s := new(signer)
	s.states.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

// entry is signatureEntry under the signer's key.
func (s *signer) entry(id string, unix int64, body []byte) string {
	h := s.states.Get().(hash.Hash)
	defer s.states.Put(h)
	h.Reset()
	var mac [sha256.Size]byte
	return formatEntry(sumSigned(h, id, unix, body, mac[:0]))
}

// Sign returns the webhook-signature entry ("v1,<base64>") that secret
// gives for message id, timestamp ts (whole seconds count) and body. It is
// for receivers' tests and for senders outside this package; Deliver signs
// by itself.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	return signatureEntry(key, id, ts.Unix(), body), nil
}

// Verify checks a request signed the Standard Webhooks way: headers must
// carry webhook-id, webhook-timestamp (unix seconds, within tolerance of
// now, either way) and webhook-signature, a space-separated list of
// "version,signature" entries of which at least one v1 entry must be the
// HMAC-SHA256 of "{id}.{timestamp}.{body}" under secret's key. body must
// be the raw bytes received. A tolerance <= 0 means DefaultTolerance.
// Signatures are compared in constant time. To accept several secrets
// during a rotation, or to decode a secret once for many requests, use
// Keys.
//
// The error wraps ErrInvalidSecret, ErrMissingHeaders,
// ErrInvalidTimestamp, ErrTimestampTolerance or ErrNoMatchingSignature.
func Verify(secret string, headers http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := decodeSecret(secret)
	if err != nil {
		return err
	}
	return verify([][]byte{key}, headers, body, tolerance, now)
}

// Keys are the decoded HMAC keys of one or more secrets, for a receiver
// that checks many requests under the same secrets: Verify would decode
// the secret again on every request.
type Keys struct{ keys [][]byte }

// NewKeys decodes secrets ("whsec_<base64>" each) once. The error wraps
// ErrInvalidSecret.
func NewKeys(secrets ...string) (Keys, error) {
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		key, err := decodeSecret(s)
		if err != nil {
			return Keys{}, fmt.Errorf("secret %d: %w", i+1, err)
		}
		keys = append(keys, key)
	}
	return Keys{keys: keys}, nil
}

// Verify is the package's Verify under any of k's keys: it accepts a
// signature made with any one of them (a rotation).
func (k Keys) Verify(headers http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	if len(k.keys) == 0 {
		return fmt.Errorf("%w: no secret", ErrInvalidSecret)
	}
	return verify(k.keys, headers, body, tolerance, now)
}

// The headers' canonical forms (http.CanonicalHeaderKey), as net/http
// stores them: Header.Get with a canonical name does not convert it again
// on every request.
const (
	canonicalID        = "Webhook-Id"
	canonicalTimestamp = "Webhook-Timestamp"
	canonicalSignature = "Webhook-Signature"
)

func verify(keys [][]byte, headers http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	id, sigs := headers.Get(canonicalID), headers.Get(canonicalSignature)
	tsText := headers.Get(canonicalTimestamp)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrInvalidTimestamp, tsText)
	}
	if err := checkTolerance(unix, tolerance, now); err != nil {
		return err
	}
	for _, key := range keys {
		want := signature(key, id, unix, body)
		for entry := range strings.FieldsSeq(sigs) {
			version, encoded, ok := strings.Cut(entry, ",")
			if !ok || version != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(encoded)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// checkTolerance reports whether unix lies within tolerance of now.
func checkTolerance(unix int64, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	skew := now.Sub(time.Unix(unix, 0))
	if skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: timestamp %d is %s from now (tolerance %s)",
			ErrTimestampTolerance, unix, skew.Round(time.Second), tolerance)
	}
	return nil
}
