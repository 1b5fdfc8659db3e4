package inbox

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

const (
	// specSecret and its vector come from the Standard Webhooks test suite.
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	oldSecret  = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	stripeKey  = "whsec_stripe_test_secret"
)

func TestStandardWebhooksSpecVector(t *testing.T) {
	t.Parallel()
	v, err := NewVerifier(SchemeStandardWebhooks, []string{specSecret}, 0)
	require.NoError(t, err)
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	id, err := v.Verify(h, []byte(`{"test": 2432232314}`), time.Unix(1614265330+10, 0))
	require.NoError(t, err)
	require.Equal(t, "msg_p5jXN8AQM9LWM0D4loKWxJek", id)
}

// stripeHeader builds a Stripe-Signature header.
func stripeHeader(ts int64, secrets []string, body []byte) http.Header {
	value := "t=" + strconv.FormatInt(ts, 10)
	for _, s := range secrets {
		value += ",v1=" + hex.EncodeToString(StripeSignature(s, ts, body))
	}
	h := http.Header{}
	h.Set(StripeHeader, value)
	return h
}

func standardHeader(t *testing.T, id string, ts int64, secrets []string, body []byte) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	var sigs string
	for _, s := range secrets {
		sig, err := webhook.Sign(s, id, time.Unix(ts, 0), body)
		require.NoError(t, err)
		sigs += sig + " "
	}
	if sigs != "" {
		h.Set("webhook-signature", sigs[:len(sigs)-1])
	}
	return h
}

// The vectors, for both schemes: valid; body changed by one byte;
// timestamp 301 s old (and 301 s ahead); rotation (two secrets configured,
// or two signatures sent, one valid); missing header.
func TestSignatureVectors(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1","amount":42}`)
	changed := []byte(`{"id":"evt_1","amount":43}`)
	for _, scheme := range []string{SchemeStandardWebhooks, SchemeStripe} {
		newSecret := specSecret
		if scheme == SchemeStripe {
			newSecret = stripeKey
		}
		sign := func(ts int64, b []byte, secrets ...string) http.Header {
			if scheme == SchemeStripe {
				return stripeHeader(ts, secrets, b)
			}
			return standardHeader(t, "msg_1", ts, secrets, b)
		}
		cases := []struct {
			name       string
			configured []string
			headers    http.Header
			body       []byte
			ok         bool
		}{
			{"valid", []string{newSecret}, sign(now.Unix(), body, newSecret), body, true},
			{"body changed by one byte", []string{newSecret}, sign(now.Unix(), body, newSecret), changed, false},
			{"timestamp 301 s old", []string{newSecret}, sign(now.Unix()-301, body, newSecret), body, false},
			{"timestamp 300 s old", []string{newSecret}, sign(now.Unix()-300, body, newSecret), body, true},
			{"timestamp 301 s ahead", []string{newSecret}, sign(now.Unix()+301, body, newSecret), body, false},
			{"rotation: old secret still accepted", []string{newSecret, oldSecret}, sign(now.Unix(), body, oldSecret), body, true},
			{"rotation: two signatures, one valid", []string{newSecret}, sign(now.Unix(), body, oldSecret, newSecret), body, true},
			{"wrong secret", []string{newSecret}, sign(now.Unix(), body, oldSecret), body, false},
			{"missing header", []string{newSecret}, http.Header{}, body, false},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s", scheme, tc.name), func(t *testing.T) {
				v, err := NewVerifier(scheme, tc.configured, 0)
				require.NoError(t, err)
				_, err = v.Verify(tc.headers, tc.body, now)
				if tc.ok {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, ErrSignature)
				}
			})
		}
	}
}

func TestStripeHeaderParsing(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{}`)
	v, err := NewVerifier(SchemeStripe, []string{stripeKey}, 0)
	require.NoError(t, err)
	good := hex.EncodeToString(StripeSignature(stripeKey, now.Unix(), body))
	for value, ok := range map[string]bool{
		fmt.Sprintf("t=%d,v1=%s", now.Unix(), good):                  true,
		fmt.Sprintf("t=%d, v0=abcd, v1=zz, v1=%s", now.Unix(), good): true,
		fmt.Sprintf("v1=%s", good):                                   false,
		fmt.Sprintf("t=%d", now.Unix()):                              false,
		fmt.Sprintf("t=x,v1=%s", good):                               false,
		fmt.Sprintf("t=%d,t=%d,v1=%s", now.Unix(), now.Unix(), good): false,
	} {
		h := http.Header{}
		h.Set(StripeHeader, value)
		_, err := v.Verify(h, body, now)
		require.Equal(t, ok, err == nil, "%s: %v", value, err)
	}
}

func TestNewVerifierRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme  string
		secrets []string
	}{
		{SchemeStandardWebhooks, nil},
		{SchemeStandardWebhooks, []string{""}},
		{SchemeStandardWebhooks, []string{"whsec_not base64!"}},
		{"hmac-md5", []string{"x"}},
	} {
		_, err := NewVerifier(tc.scheme, tc.secrets, 0)
		require.Error(t, err, "%s %v", tc.scheme, tc.secrets)
	}
}

// Every refusal says why, from a small fixed set, and a timestamp refusal
// says by how much; the receiver counts the reason per source and logs it
// with the skew.
func TestSignatureRefusalReasons(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	badTS := standardHeader(t, "m", now.Unix(), []string{specSecret}, body)
	badTS.Set("webhook-timestamp", "yesterday")
	tests := []struct {
		name, scheme string
		headers      http.Header
		reason       SignatureReason
		skew         time.Duration
	}{
		{"standard: no headers", SchemeStandardWebhooks, http.Header{}, ReasonMissingHeader, 0},
		{"standard: timestamp not a number", SchemeStandardWebhooks, badTS, ReasonBadFormat, 0},
		{"standard: 7 minutes old", SchemeStandardWebhooks, standardHeader(t, "m", now.Add(-7*time.Minute).Unix(), []string{specSecret}, body), ReasonTimestampSkew, 7 * time.Minute},
		{"standard: 10 minutes ahead", SchemeStandardWebhooks, standardHeader(t, "m", now.Add(10*time.Minute).Unix(), []string{specSecret}, body), ReasonTimestampSkew, -10 * time.Minute},
		{"standard: another secret", SchemeStandardWebhooks, standardHeader(t, "m", now.Unix(), []string{"whsec_c29tZXRoaW5nIGVsc2U="}, body), ReasonNoMatch, 0},
		{"stripe: no header", SchemeStripe, http.Header{}, ReasonMissingHeader, 0},
		{"stripe: no v1", SchemeStripe, http.Header{StripeHeader: {"t=1800000000"}}, ReasonBadFormat, 0},
		{"stripe: 6 minutes old", SchemeStripe, stripeHeader(now.Add(-6*time.Minute).Unix(), []string{stripeKey}, body), ReasonTimestampSkew, 6 * time.Minute},
		{"stripe: another secret", SchemeStripe, stripeHeader(now.Unix(), []string{"whsec_other"}, body), ReasonNoMatch, 0},
	}
	for _, tt := range tests {
		secret := specSecret
		if tt.scheme == SchemeStripe {
			secret = stripeKey
		}
		v, err := NewVerifier(tt.scheme, []string{secret}, 0)
		require.NoError(t, err)
		_, err = v.Verify(tt.headers, body, now)
		require.ErrorIs(t, err, ErrSignature, tt.name)
		var serr *SignatureError
		require.ErrorAs(t, err, &serr, tt.name)
		require.Equal(t, tt.reason, serr.Reason, tt.name)
		require.Equal(t, tt.skew, serr.Skew, tt.name)
	}

	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	verifier, err := NewVerifier(SchemeStandardWebhooks, []string{specSecret}, 0)
	require.NoError(t, err)
	r := NewReceiver(ReceiverConfig{
		Metrics: NewMetrics(reg), Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return now },
		Sources:  []Source{{Name: "crm", Scheme: SchemeStandardWebhooks, Verifier: verifier, Handler: "h"}},
		Handlers: Registry{"h": {Handle: func(context.Context, pgx.Tx, Event) error { return nil }}},
	})
	_, err = r.Accept(context.Background(), "crm", standardHeader(t, "m", now.Add(-7*time.Minute).Unix(), []string{specSecret}, body), body)
	require.ErrorIs(t, err, ErrSignature)
	require.Contains(t, logs.String(), "reason=timestamp_skew skew_seconds=420")
	require.Equal(t, map[string]float64{"missing_header": 0, "bad_format": 0, "timestamp_skew": 1, "no_match": 0}, signatureFailures(t, reg, "crm"))
}

// signatureFailures reads switchyard_inbox_signature_failures_total of a
// source, by reason.
func signatureFailures(t *testing.T, reg *prometheus.Registry, source string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "switchyard_inbox_signature_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source {
				out[labels["reason"]] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
