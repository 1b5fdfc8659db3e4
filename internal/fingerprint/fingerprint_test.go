package fingerprint_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/fingerprint"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"dial tcp 10.0.0.7:443: connect: connection refused", "dial tcp <ip>: connect: connection refused"},
		{"HTTP 503 after 1.234s", "http 503 after <dur>"},
		{"HTTP/1.1 503 Service Unavailable", "http/1.1 503 service unavailable"},
		{"HTTP/1.1 5030", "http/<n> <n>"},
		{"status code 502; status=404; status: 200; exit code 137", "status code 502; status=404; status: 200; exit code <n>"},
		{"order 12345 not found", "order <n> not found"},
		{"  Order\t12345\n\nNOT   found  ", "order <n> not found"},
		{"event 0B8E6C52-1F3A-4C1E-9A62-3C2B8F0C7D11 failed", "event <uuid> failed"},
		{"at 2024-05-01T12:34:56.789Z, 2024-05-01T12:34:56+02:00, 2024-05-01 12:34:56.789+00, 2024-05-01, 07:08:09", "at <ts>, <ts>, <ts>, <ts>, <ts>"},
		{"lookup db on [2001:db8::1]:53 and fe80::1: no such host", "lookup db on <ip> and <ip>: no such host"},
		{"std::io::Error in a:b:c", "std::io::error in a:b:c"},
		{"mail to Bob.Smith+tag@Example.co.uk bounced", "mail to <email> bounced"},
		{"nil pointer at 0xc000123abc, trace 4bf92f3577b34da6a3ce929d0e0e4736", "nil pointer at <hex>, trace <hex>"},
		{"deadbeef acceded", "deadbeef acceded"},
		{"charge ch_3MqBFz2eZvKYlo2C0bQx failed", "charge <id> failed"},
		{"waited 5m30s, 87ms, 250µs, 30 seconds, 5min", "waited <dur>, <dur>, <dur>, <dur>, <dur>"},
		{`Post "https://hooks.example.com/v1/orders/123?token=abc#frag": EOF`, `post "https://hooks.example.com/v<n>/orders/<n>?<query>": eof`},
		{"GET https://api.example.com/items?page=2 failed", "get https://api.example.com/items?<query> failed"},
		{`invalid value "12 apples" for field 'amount'`, `invalid value "<q>" for field '<q>'`},
		{"can't parse users' data", "can't parse users' data"},
		{`unterminated "quote`, `unterminated "quote`},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got := fingerprint.Normalize(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, fingerprint.Normalize(got), "idempotent")
		})
	}
}

func TestOfGroups(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"ip and port", "dial tcp 10.0.0.7:443: connect: connection refused", "dial tcp 10.0.0.9:8443: connect: connection refused", true},
		{"durations", "HTTP 503 after 1.234s", "HTTP 503 after 87ms", true},
		{"status codes", "HTTP 503 after 1s", "HTTP 404 after 1s", false},
		{"status code words", "status code 500", "status code 502", false},
		{"protocol status", "HTTP/1.1 502 Bad Gateway", "HTTP/1.1 503 Bad Gateway", false},
		{"order ids", "order 12345 not found", "order 7 not found", true},
		{"different entity", "order 12345 not found", "customer 12345 not found", false},
		{"timestamps", "lease expired at 2024-05-01T12:34:56Z", "lease expired at 2025-12-31T23:59:59.999999+01:00", true},
		{"uuids", "message 0b8e6c52-1f3a-4c1e-9a62-3c2b8f0c7d11 rejected", "message 9f1c2d3e-4b5a-6c7d-8e9f-0a1b2c3d4e5f rejected", true},
		{"emails", "unknown recipient a@example.com", "unknown recipient zoe.q@mail.example.org", true},
		{"hex", "bad signature 9f86d081884c7d65", "bad signature 2c26b46b68ffc68f", true},
		{"ipv6", "connect [2001:db8::1]:443 refused", "connect [fe80::2]:80 refused", true},
		{"query strings", "GET https://x.example/a?id=1 failed", "GET https://x.example/a?id=2&z=3 failed", true},
		{"paths", "GET https://x.example/a failed", "GET https://x.example/b failed", false},
		{"quoted values", `unknown field "colour"`, `unknown field "size"`, true},
		{"case and spaces", "Connection  RESET by peer", "connection reset by peer", true},
		{"refused and reset", "connection refused", "connection reset by peer", false},
		{"timeout kinds", "context deadline exceeded", "context canceled", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := fingerprint.Of(tt.a), fingerprint.Of(tt.b)
			if tt.same {
				assert.Equal(t, a, b, "%q and %q should group: %q vs %q",
					tt.a, tt.b, fingerprint.Normalize(tt.a), fingerprint.Normalize(tt.b))
			} else {
				assert.NotEqual(t, a, b, "%q and %q should not group: both %q", tt.a, tt.b, fingerprint.Normalize(tt.a))
			}
		})
	}
}

// TestOfStable pins fingerprints: stored fingerprints group failures across
// releases, so a change of rules that changes them must be deliberate (and
// comes with a note that existing groups split).
func TestOfStable(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"dial tcp 10.0.0.7:443: connect: connection refused", "56c09af19cbc277b"},
		{"HTTP 503 after 1.234s", "25e15c19b8bc9147"},
		{"", "e3b0c44298fc1c14"}, // SHA-256 of the empty string
	}
	for _, tt := range tests {
		got := fingerprint.Of(tt.in)
		assert.Equal(t, tt.want, got, "Of(%q)", tt.in)
		assert.Len(t, got, 16)
	}
}

func TestNormalizeBounds(t *testing.T) {
	t.Parallel()
	words := strings.Repeat("connection refused again ", 100)
	got := fingerprint.Normalize(words)
	assert.LessOrEqual(t, len(got), fingerprint.MaxLen)
	assert.True(t, strings.HasSuffix(got, " "+fingerprint.Ellipsis), "cut text ends with the ellipsis: %q", got)
	assert.True(t, strings.HasPrefix(words, strings.TrimSuffix(got, " "+fingerprint.Ellipsis)), "cut between words")
	assert.Equal(t, got, fingerprint.Normalize(got))

	// Numbers grow into <n>: the result is bounded all the same.
	digits := strings.Repeat("1 ", 400)
	assert.LessOrEqual(t, len(fingerprint.Normalize(digits)), fingerprint.MaxLen)

	// Only the first MaxInput bytes count.
	prefix := strings.Repeat("x", fingerprint.MaxInput)
	assert.Equal(t, fingerprint.Of(prefix+" tail one"), fingerprint.Of(prefix+" tail two"))

	// One word longer than the bound is cut inside.
	long := fingerprint.Normalize(strings.Repeat("z", 1000))
	assert.Equal(t, strings.Repeat("z", fingerprint.MaxLen-4)+" "+fingerprint.Ellipsis, long)

	// ... but not where the cut would change what is kept: "status=50"
	// would normalise to "status=<n>".
	statuses := fingerprint.Normalize("abc," + strings.Repeat("status=503,", 100)) // cut after a "50"
	assert.True(t, strings.HasSuffix(statuses, "status= "+fingerprint.Ellipsis), "cut: %q", statuses)
	assert.Equal(t, statuses, fingerprint.Normalize(statuses))
}

func TestNormalizeInvalidUTF8(t *testing.T) {
	t.Parallel()
	got := fingerprint.Normalize("bad \xff\xfe byte 42")
	assert.True(t, utf8.ValidString(got))
	assert.Equal(t, "bad \uFFFD byte <n>", got)
}

func FuzzNormalize(f *testing.F) {
	seeds := []string{
		"dial tcp 10.0.0.7:443: connect: connection refused",
		"HTTP/1.1 503 Service Unavailable after 1.5s",
		`Post "https://x.example/a/1?b=2": status=404 'v' "w"`,
		"2024-05-01T12:34:56Z [::1]:80 a@b.co 0xdead ch_3MqBFz2eZvKYlo2C0bQx",
		"can't 'x' users' \"y",
		strings.Repeat("http 503 ", 80),
		strings.Repeat("é", 300),
		"\xff\xfe",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := fingerprint.Normalize(in)
		require.LessOrEqual(t, len(got), fingerprint.MaxLen)
		require.True(t, utf8.ValidString(got), "valid UTF-8: %q", got)
		again := fingerprint.Normalize(got)
		require.Equal(t, got, again, "idempotent for %q", in)
		require.Equal(t, fingerprint.Of(in), fingerprint.Of(got))
	})
}

func BenchmarkOf(b *testing.B) {
	msg := `Post "https://hooks.example.com/v1/orders/123?token=abc": dial tcp 10.0.0.7:443: ` +
		`connect: connection refused (attempt 3 at 2024-05-01T12:34:56Z, after 1.234s, id 0b8e6c52-1f3a-4c1e-9a62-3c2b8f0c7d11)`
	for b.Loop() {
		fingerprint.Of(msg)
	}
}
