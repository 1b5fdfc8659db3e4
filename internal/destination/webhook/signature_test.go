package webhook_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

const (
	secretA = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	secretB = "whsec_ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q="
	// specSecret and its vector come from the Standard Webhooks test suite.
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// TestSignSpecVector checks Sign against the published test vector.
func TestSignSpecVector(t *testing.T) {
	t.Parallel()
	got, err := webhook.Sign(specSecret, "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	require.NoError(t, err)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"order":42}`)
	signed := func(ts time.Time, sigs ...string) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderID, "msg_1")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		for _, s := range sigs {
			if h.Get(webhook.HeaderSignature) != "" {
				s = h.Get(webhook.HeaderSignature) + " " + s
			}
			h.Set(webhook.HeaderSignature, s)
		}
		return h
	}
	sign := func(secret string, ts time.Time, b []byte) string {
		s, err := webhook.Sign(secret, "msg_1", ts, b)
		require.NoError(t, err)
		return s
	}
	tampered := []byte(`{"order":43}`)
	tests := []struct {
		name    string
		secret  string
		headers http.Header
		body    []byte
		wantErr error
	}{
		{"valid", secretA, signed(now, sign(secretA, now, body)), body, nil},
		{"valid without prefix", secretA[len("whsec_"):], signed(now, sign(secretA, now, body)), body, nil},
		{"second of several", secretA, signed(now, sign(secretB, now, body), sign(secretA, now, body)), body, nil},
		{"at the tolerance edge", secretA, signed(now.Add(-time.Minute), sign(secretA, now.Add(-time.Minute), body)), body, nil},
		{"one byte of body changed", secretA, signed(now, sign(secretA, now, body)), tampered, webhook.ErrNoMatchingSignature},
		{"other secret", secretB, signed(now, sign(secretA, now, body)), body, webhook.ErrNoMatchingSignature},
		{"v2 entry ignored", secretA, signed(now, "v2,"+sign(secretA, now, body)[3:]), body, webhook.ErrNoMatchingSignature},
		{"garbage entry", secretA, signed(now, "v1,not-base64!"), body, webhook.ErrNoMatchingSignature},
		{"too old", secretA, signed(now.Add(-61*time.Second), sign(secretA, now.Add(-61*time.Second), body)), body, webhook.ErrTimestampTolerance},
		{"too new", secretA, signed(now.Add(61*time.Second), sign(secretA, now.Add(61*time.Second), body)), body, webhook.ErrTimestampTolerance},
		{"missing signature", secretA, signed(now), body, webhook.ErrMissingHeaders},
		{"bad timestamp", secretA, func() http.Header {
			h := signed(now, sign(secretA, now, body))
			h.Set(webhook.HeaderTimestamp, "yesterday")
			return h
		}(), body, webhook.ErrInvalidTimestamp},
		{"bad secret", "whsec_%%%", signed(now, sign(secretA, now, body)), body, webhook.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := webhook.Verify(tt.secret, tt.headers, tt.body, time.Minute, now)
			// Keys, decoded once, must give the same verdict.
			keys, keysErr := webhook.NewKeys(tt.secret)
			if keysErr == nil {
				keysErr = keys.Verify(tt.headers, tt.body, time.Minute, now)
			}
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.NoError(t, keysErr)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.ErrorIs(t, keysErr, tt.wantErr)
		})
	}
}

// TestKeysRotation: Keys accepts a signature by any one of its secrets,
// whichever entry of the header carries it, and none by another secret.
func TestKeysRotation(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"order":42}`)
	const secretC = "whsec_c2VjcmV0IEMgZm9yIHRoZSByb3RhdGlvbiB0ZXN0"
	signedBy := func(secrets ...string) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderID, "msg_1")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		var entries []string
		for _, s := range secrets {
			e, err := webhook.Sign(s, "msg_1", now, body)
			require.NoError(t, err)
			entries = append(entries, e)
		}
		h.Set(webhook.HeaderSignature, strings.Join(entries, " "))
		return h
	}
	keys, err := webhook.NewKeys(secretA, secretB)
	require.NoError(t, err)
	require.NoError(t, keys.Verify(signedBy(secretA), body, time.Minute, now))
	require.NoError(t, keys.Verify(signedBy(secretB), body, time.Minute, now))
	require.NoError(t, keys.Verify(signedBy(secretC, secretB), body, time.Minute, now))
	require.ErrorIs(t, keys.Verify(signedBy(secretC), body, time.Minute, now), webhook.ErrNoMatchingSignature)

	_, err = webhook.NewKeys(secretA, "whsec_%%%")
	require.ErrorIs(t, err, webhook.ErrInvalidSecret)
	require.ErrorIs(t, webhook.Keys{}.Verify(signedBy(secretA), body, time.Minute, now), webhook.ErrInvalidSecret)
}

// TestVerifyDefaultTolerance: a zero tolerance means five minutes.
func TestVerifyDefaultTolerance(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{}`)
	for _, tc := range []struct {
		age     time.Duration
		wantErr bool
	}{{4 * time.Minute, false}, {6 * time.Minute, true}} {
		ts := now.Add(-tc.age)
		sig, err := webhook.Sign(secretA, "msg_1", ts, body)
		require.NoError(t, err)
		h := http.Header{}
		h.Set(webhook.HeaderID, "msg_1")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(webhook.HeaderSignature, sig)
		err = webhook.Verify(secretA, h, body, 0, now)
		require.Equal(t, tc.wantErr, err != nil, "age %s: %v", tc.age, err)
	}
}
