package inbox

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// DefaultTolerance is how far a signature's timestamp may lie from our
// clock, either way, when a source does not say.
const DefaultTolerance = 5 * time.Minute

// ErrSignature wraps every reason a request's signature is refused: a
// missing or malformed header, a timestamp outside the tolerance, or no
// signature that any of the source's secrets produces.
var ErrSignature = errors.New("inbox: bad signature")

// SignatureReason is why a signature was refused. The set is fixed and
// small, so it labels a metric; it is logged and counted, never sent to
// the sender (who learns only that the signature was refused).
type SignatureReason string

// The reasons a signature is refused.
const (
	// ReasonMissingHeader: a signature header is absent.
	ReasonMissingHeader SignatureReason = "missing_header"
	// ReasonBadFormat: a header is there but cannot be read (a timestamp
	// that is not a number, a Stripe header without t= or v1=).
	ReasonBadFormat SignatureReason = "bad_format"
	// ReasonTimestampSkew: the timestamp lies outside the tolerance;
	// SignatureError.Skew says by how much.
	ReasonTimestampSkew SignatureReason = "timestamp_skew"
	// ReasonNoMatch: no signature is one any of the source's secrets makes.
	ReasonNoMatch SignatureReason = "no_match"
)

// signatureReasons are all the reasons, for the metric's zero series.
var signatureReasons = []SignatureReason{ReasonMissingHeader, ReasonBadFormat, ReasonTimestampSkew, ReasonNoMatch}

// SignatureError is a refused signature. It wraps ErrSignature and the
// verifier's cause.
type SignatureError struct {
	Reason SignatureReason
	// Skew is our clock minus the signed timestamp (positive: the
	// signature is old), for ReasonTimestampSkew; 0 otherwise.
	Skew time.Duration
	err  error
}

func (e *SignatureError) Error() string   { return ErrSignature.Error() + ": " + e.err.Error() }
func (e *SignatureError) Unwrap() []error { return []error{ErrSignature, e.err} }

func refuse(reason SignatureReason, skew time.Duration, err error) error {
	return &SignatureError{Reason: reason, Skew: skew, err: err}
}

// The signature schemes a source may use (switchyard.inbox_sources.scheme).
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeStripe           = "stripe"
)

// StripeHeader carries the Stripe scheme's timestamp and signatures.
const StripeHeader = "Stripe-Signature"

// Verifier checks a request's signature over the raw body, before anything
// parses it. It returns the event id the signature covers, or "" when the
// scheme signs none (the id then comes from the payload).
type Verifier interface {
	Verify(headers http.Header, body []byte, now time.Time) (eventID string, err error)
}

// NewVerifier returns the verifier of a scheme with the source's secrets
// (several during a rotation: a signature by any of them is accepted) and
// timestamp tolerance (<= 0: DefaultTolerance).
func NewVerifier(scheme string, secrets []string, tolerance time.Duration) (Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("inbox: a source needs at least one secret")
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("inbox: secret %d is empty", i+1)
		}
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	switch scheme {
	case SchemeStandardWebhooks:
		// The secrets are decoded once, here, rather than on every
		// request.
		keys, err := webhook.NewKeys(secrets...)
		if err != nil {
			return nil, fmt.Errorf("inbox: %w", err)
		}
		return standardWebhooks{keys: keys, tolerance: tolerance}, nil
	case SchemeStripe:
		return stripe{secrets: secrets, tolerance: tolerance}, nil
	}
	return nil, fmt.Errorf("inbox: unknown signature scheme %q: want %s or %s", scheme, SchemeStandardWebhooks, SchemeStripe)
}

// standardWebhooks verifies with webhook.Keys, the same code that signs
// our own deliveries: webhook-id, webhook-timestamp and webhook-signature
// ("v1,<base64>" entries, space-separated) over "{id}.{timestamp}.{body}".
type standardWebhooks struct {
	keys      webhook.Keys
	tolerance time.Duration
}

func (v standardWebhooks) Verify(headers http.Header, body []byte, now time.Time) (string, error) {
	err := v.keys.Verify(headers, body, v.tolerance, now)
	if err == nil {
		return headers.Get(webhook.HeaderID), nil
	}
	switch {
	case errors.Is(err, webhook.ErrMissingHeaders):
		return "", refuse(ReasonMissingHeader, 0, err)
	case errors.Is(err, webhook.ErrTimestampTolerance):
		ts, _ := strconv.ParseInt(headers.Get(webhook.HeaderTimestamp), 10, 64) // it parsed in Verify
		return "", refuse(ReasonTimestampSkew, now.Sub(time.Unix(ts, 0)), err)
	case errors.Is(err, webhook.ErrNoMatchingSignature):
		return "", refuse(ReasonNoMatch, 0, err)
	}
	return "", refuse(ReasonBadFormat, 0, err)
}

// stripe verifies Stripe's scheme: Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...],
// where each v1 is the hex HMAC-SHA256 of "{t}.{body}" keyed with the
// secret's bytes as given (whsec_... included). Other entries (v0, the
// test-mode scheme) are ignored.
type stripe struct {
	secrets   []string
	tolerance time.Duration
}

func (v stripe) Verify(headers http.Header, body []byte, now time.Time) (string, error) {
	header := headers.Get(StripeHeader)
	if header == "" {
		return "", refuse(ReasonMissingHeader, 0, errors.New("missing "+StripeHeader+" header"))
	}
	ts, sigs, err := parseStripeHeader(header)
	if err != nil {
		return "", refuse(ReasonBadFormat, 0, err)
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > v.tolerance || skew < -v.tolerance {
		return "", refuse(ReasonTimestampSkew, skew, fmt.Errorf("timestamp %d is %s from now (tolerance %s)", ts, skew.Round(time.Second), v.tolerance))
	}
	for _, secret := range v.secrets {
		want := StripeSignature(secret, ts, body)
		for _, got := range sigs {
			if hmac.Equal(got, want) {
				return "", nil
			}
		}
	}
	return "", refuse(ReasonNoMatch, 0, errors.New("no matching v1 signature"))
}

// StripeSignature returns the raw HMAC-SHA256 of "{t}.{body}" under secret:
// hex-encoded, it is a v1 entry of the Stripe-Signature header.
func StripeSignature(secret string, t int64, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(strconv.AppendInt(nil, t, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// parseStripeHeader reads "t=...,v1=...,v1=...".
func parseStripeHeader(header string) (int64, [][]byte, error) {
	if header == "" {
		return 0, nil, errors.New("missing " + StripeHeader + " header")
	}
	var ts int64 = -1
	var sigs [][]byte
	for item := range strings.SplitSeq(header, ",") {
		key, value, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch key {
		case "t":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || ts != -1 {
				return 0, nil, fmt.Errorf("invalid timestamp in %s", StripeHeader)
			}
			ts = n
		case "v1":
			if sig, err := hex.DecodeString(value); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	switch {
	case ts == -1:
		return 0, nil, fmt.Errorf("no timestamp in %s", StripeHeader)
	case len(sigs) == 0:
		return 0, nil, fmt.Errorf("no v1 signature in %s", StripeHeader)
	}
	return ts, sigs, nil
}
