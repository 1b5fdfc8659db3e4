package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/testwait"
)

// request is what a test server received.
type request struct {
	header http.Header
	body   []byte
}

// recorder answers every request with status and body and hands what it
// received to the test.
type recorder struct {
	status int
	body   string
	got    chan request
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec.got <- request{header: r.Header.Clone(), body: body}
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, rec.body)
}

// next returns the next request the recorder received.
func (rec *recorder) next(t *testing.T) request {
	t.Helper()
	return testwait.For(t, 5*time.Second, "a request", rec.got)
}

func newRecorder(status int, body string) *recorder {
	return &recorder{status: status, body: body, got: make(chan request, 16)}
}

// serve starts a test server, closed in cleanup.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newDest builds a destination for url, signed with secretA unless cfg
// says otherwise, and releases its connections in cleanup.
func newDest(t *testing.T, url string, edit func(*webhook.Config)) *webhook.Destination {
	t.Helper()
	cfg := webhook.Config{URL: url, Secret: secretA}
	if edit != nil {
		edit(&cfg)
	}
	d, err := webhook.New(cfg)
	require.NoError(t, err)
	t.Cleanup(d.CloseIdleConnections)
	return d
}

func delivery(id string) destination.Delivery {
	return destination.Delivery{MessageID: id, Topic: "order.created", Payload: []byte(`{"order":42}`), Attempt: 1}
}

func TestDeliverSigns(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.StatusNoContent, "")
	srv := serve(t, rec)
	now := time.Unix(1_700_000_000, 0)
	d := newDest(t, srv.URL, func(c *webhook.Config) { c.Now = func() time.Time { return now } })

	out, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, out.StatusCode)

	got := rec.next(t)
	assert.Equal(t, `{"order":42}`, string(got.body))
	assert.Equal(t, "msg_1", got.header.Get("webhook-id"))
	assert.Equal(t, "1700000000", got.header.Get("webhook-timestamp"))
	assert.Equal(t, "application/json", got.header.Get("Content-Type"))
	assert.Equal(t, "Switchyard-Webhook/1", got.header.Get("User-Agent"))
	require.NoError(t, webhook.Verify(secretA, got.header, got.body, time.Minute, now))

	// Computed here without the package, from the spec's definition.
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secretA, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	_, _ = fmt.Fprintf(mac, "%s.%d.%s", "msg_1", now.Unix(), got.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	assert.Equal(t, want, got.header.Get("webhook-signature"))
}

func TestDeliverRotation(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.StatusOK, "")
	srv := serve(t, rec)
	d := newDest(t, srv.URL, func(c *webhook.Config) { c.Secrets = []string{secretB} })

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.NoError(t, err)
	got := rec.next(t)
	assert.Len(t, strings.Fields(got.header.Get("webhook-signature")), 2)
	for _, secret := range []string{secretA, secretB} {
		require.NoError(t, webhook.Verify(secret, got.header, got.body, time.Minute, time.Now()))
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("some other key of 32 bytes......"))
	require.ErrorIs(t, webhook.Verify(other, got.header, got.body, time.Minute, time.Now()),
		webhook.ErrNoMatchingSignature)
}

func TestDeliverStatus(t *testing.T) {
	t.Parallel()
	const (
		ok = iota
		permanent
		retryable
	)
	tests := []struct {
		status int
		want   int
	}{
		{200, ok}, {201, ok}, {204, ok},
		{400, permanent}, {410, permanent}, {422, permanent},
		// A receiver rotating its secret or deploying a route answers
		// these for a while: retried by default.
		{401, retryable}, {403, retryable}, {404, retryable},
		{408, retryable}, {429, retryable}, {500, retryable}, {502, retryable}, {503, retryable},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := serve(t, newRecorder(tt.status, "  the receiver\nsays no  "))
			d := newDest(t, srv.URL+"/hook", nil)

			out, err := d.Deliver(t.Context(), delivery("msg_1"))
			assert.Equal(t, tt.status, out.StatusCode)
			if tt.status != http.StatusNoContent { // which has no body
				assert.Equal(t, "  the receiver\nsays no  ", out.Response)
			}
			switch tt.want {
			case ok:
				require.NoError(t, err)
			case permanent, retryable:
				require.Error(t, err)
				assert.Equal(t, tt.want == permanent, destination.IsPermanent(err), "permanent: %v", err)
				assert.EqualError(t, err, fmt.Sprintf("POST %s/hook: HTTP %d: the receiver says no", srv.URL, tt.status))
			}
		})
	}
}

// A destination's own list of permanent statuses replaces the default
// policy: exactly those are permanent, and an empty list makes none so.
func TestDeliverPermanentStatusesPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy    []int
		status    int
		permanent bool
	}{
		{[]int{401, 409}, 401, true},
		{[]int{401, 409}, 409, true},
		{[]int{401, 409}, 400, false},
		{[]int{401, 409}, 500, false},
		{[]int{}, 400, false},
		{[]int{}, 422, false},
		{nil, 422, true},
		{nil, 404, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d", tt.policy, tt.status), func(t *testing.T) {
			t.Parallel()
			srv := serve(t, newRecorder(tt.status, "no"))
			d := newDest(t, srv.URL, func(c *webhook.Config) { c.PermanentStatuses = tt.policy })
			out, err := d.Deliver(t.Context(), delivery("msg_1"))
			require.Error(t, err)
			require.Equal(t, tt.status, out.StatusCode)
			require.Equal(t, tt.permanent, destination.IsPermanent(err), "permanent: %v", err)
		})
	}
}

// neverAnswers is a receiver that answers no request until the client
// gives up or the test ends.
func neverAnswers(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv
}

// TestDeliverTimeout: a receiver that never answers costs one Timeout and
// a retryable error that says so.
func TestDeliverTimeout(t *testing.T) {
	t.Parallel()
	srv := neverAnswers(t)
	d := newDest(t, srv.URL+"/slow", func(c *webhook.Config) { c.Timeout = 50 * time.Millisecond })

	out, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.Error(t, err)
	assert.False(t, destination.IsPermanent(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "POST "+srv.URL+"/slow: timeout after 50ms")
	assert.Zero(t, out.StatusCode)
}

// TestDeliverTimeoutOfTheCaller: a caller's deadline sooner than the
// Timeout (the dispatcher gives each attempt one) ends the attempt as a
// timeout too, and the error gives the time the attempt had.
func TestDeliverTimeoutOfTheCaller(t *testing.T) {
	t.Parallel()
	srv := neverAnswers(t)
	d := newDest(t, srv.URL+"/slow", nil) // DefaultTimeout, 10 s
	ctx, cancel := context.WithTimeout(t.Context(), 80*time.Millisecond)
	defer cancel()

	start := time.Now()
	_, err := d.Deliver(ctx, delivery("msg_1"))
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.False(t, destination.IsPermanent(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Regexp(t, `^POST `+regexp.QuoteMeta(srv.URL)+`/slow: timeout after [1-8]?[0-9]ms: `, err.Error())
}

// TestDeliverCanceled: the caller's cancellation is reported as such.
func TestDeliverCanceled(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) })
	d := newDest(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()

	_, err := d.Deliver(ctx, delivery("msg_1"))
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, destination.IsPermanent(err))
}

func TestDeliverTransportError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens on its port any more
	url := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/hook?token=s3cret"
	d := newDest(t, url, nil)

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.Error(t, err)
	assert.False(t, destination.IsPermanent(err))
	assert.Contains(t, err.Error(), "POST "+srv.URL+"/hook: ")
	assert.NotContains(t, err.Error(), "hunter2")
	assert.NotContains(t, err.Error(), "s3cret")
}

func TestDeliverTruncatesResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{"ascii", strings.Repeat("x", 100_000), strings.Repeat("x", destination.MaxResponseBytes)},
		// 'a' then two-byte runes: the limit falls inside a rune, dropped.
		{"cut rune", "a" + strings.Repeat("é", 1000), "a" + strings.Repeat("é", (destination.MaxResponseBytes-1)/2)},
		{"binary", "ok\x00\xff", "ok\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, newRecorder(http.StatusOK, tt.body))
			d := newDest(t, srv.URL, nil)

			out, err := d.Deliver(t.Context(), delivery("msg_1"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, out.Response)
			assert.LessOrEqual(t, len(out.Response), destination.MaxResponseBytes)
			assert.True(t, utf8.ValidString(out.Response))
		})
	}
}

func TestDeliverRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/hook", http.RedirectHandler("/moved", http.StatusTemporaryRedirect))
	mux.HandleFunc("/moved", func(http.ResponseWriter, *http.Request) { followed.Add(1) })
	srv := serve(t, mux)
	d := newDest(t, srv.URL+"/hook", nil)

	out, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.Error(t, err)
	assert.True(t, destination.IsPermanent(err))
	assert.Contains(t, err.Error(), `HTTP 307: redirect to "/moved" not followed`)
	assert.Equal(t, http.StatusTemporaryRedirect, out.StatusCode)
	assert.Zero(t, followed.Load())
}

// TestDeliverHeaders: static and message headers pass through, the
// message's winning, but neither overrides the signature or Content-Type.
func TestDeliverHeaders(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.StatusOK, "")
	srv := serve(t, rec)
	d := newDest(t, srv.URL, func(c *webhook.Config) {
		c.Headers = map[string]string{"X-Static": "s", "X-Both": "static", "Webhook-Id": "static"}
	})
	m := delivery("msg_1")
	m.Headers = map[string]string{
		"X-Both": "message", "traceparent": "00-abc-def-01",
		"webhook-id": "forged", "WEBHOOK-SIGNATURE": "v1,forged", "webhook-timestamp": "1",
		"content-type": "text/plain",
	}

	_, err := d.Deliver(t.Context(), m)
	require.NoError(t, err)
	got := rec.next(t)
	assert.Equal(t, "s", got.header.Get("X-Static"))
	assert.Equal(t, []string{"message"}, got.header.Values("X-Both"))
	assert.Equal(t, "00-abc-def-01", got.header.Get("Traceparent"))
	assert.Equal(t, []string{"msg_1"}, got.header.Values("webhook-id"))
	assert.Equal(t, []string{"application/json"}, got.header.Values("Content-Type"))
	assert.Len(t, got.header.Values("webhook-signature"), 1)
	require.NoError(t, webhook.Verify(secretA, got.header, got.body, time.Minute, time.Now()))
}

// TestDeliverSameIDAcrossAttempts: a retry carries the same webhook-id,
// freshly signed.
func TestDeliverSameIDAcrossAttempts(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	got := make(chan request, 2)
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{header: r.Header.Clone(), body: body}
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	d := newDest(t, srv.URL, nil)

	m := delivery("msg_retry")
	_, err := d.Deliver(t.Context(), m)
	require.Error(t, err)
	require.False(t, destination.IsPermanent(err))
	m.Attempt = 2
	_, err = d.Deliver(t.Context(), m)
	require.NoError(t, err)

	first, second := <-got, <-got
	assert.Equal(t, "msg_retry", first.header.Get("webhook-id"))
	assert.Equal(t, first.header.Get("webhook-id"), second.header.Get("webhook-id"))
	for _, r := range []request{first, second} {
		require.NoError(t, webhook.Verify(secretA, r.header, r.body, time.Minute, time.Now()))
	}
}

// TestDeliverRefusesBadMessage: nothing is sent and the error is
// permanent.
func TestDeliverRefusesBadMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*destination.Delivery)
		want string
	}{
		{"invalid JSON", func(m *destination.Delivery) { m.Payload = []byte(`{"order":`) }, "invalid payload: not valid JSON"},
		{"empty payload", func(m *destination.Delivery) { m.Payload = nil }, "invalid payload: not valid JSON"},
		{"no message id", func(m *destination.Delivery) { m.MessageID = "" }, "invalid message id"},
		{"bad header name", func(m *destination.Delivery) { m.Headers = map[string]string{"X Bad": "v"} }, `invalid header name "X Bad"`},
		{"bad header value", func(m *destination.Delivery) { m.Headers = map[string]string{"X-Bad": "a\r\nb"} }, "header X-Bad: invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(http.StatusOK, "")
			srv := serve(t, rec)
			d := newDest(t, srv.URL, nil)
			m := delivery("msg_1")
			tt.edit(&m)

			_, err := d.Deliver(t.Context(), m)
			require.Error(t, err)
			assert.True(t, destination.IsPermanent(err))
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, rec.got)
		})
	}
}

// TestASCIIHost: an internationalised name is sent and looked up in its
// ASCII form, its port kept; other hosts are left as they are.
func TestASCIIHost(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://bücher.example/hook":      "xn--bcher-kva.example",
		"http://bücher.example:8080/hook":  "xn--bcher-kva.example:8080",
		"http://example.com:8080/hook":     "example.com:8080",
		"http://[::1]:8080/hook":           "[::1]:8080",
		"http://user:pw@127.0.0.1:80/hook": "127.0.0.1:80",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		got, err := webhook.ASCIIHost(u)
		require.NoError(t, err, raw)
		assert.Equal(t, want, got, raw)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	valid := webhook.Config{URL: "https://example.com/hook", Secret: secretA}
	tests := []struct {
		name string
		edit func(*webhook.Config)
		want string // "" means valid
	}{
		{"valid", func(*webhook.Config) {}, ""},
		{"only rotation secrets", func(c *webhook.Config) { c.Secret, c.Secrets = "", []string{secretA, secretB} }, ""},
		{"empty URL", func(c *webhook.Config) { c.URL = "" }, "scheme must be http or https"},
		{"relative URL", func(c *webhook.Config) { c.URL = "/hook" }, "scheme must be http or https"},
		{"ftp", func(c *webhook.Config) { c.URL = "ftp://example.com/" }, "scheme must be http or https"},
		{"no host", func(c *webhook.Config) { c.URL = "http:///hook" }, "no host"},
		{"international host", func(c *webhook.Config) { c.URL = "https://bücher.example/hook" }, ""},
		{"unparsable", func(c *webhook.Config) { c.URL = "http://exa mple.com/" }, "invalid URL"},
		{"no secret", func(c *webhook.Config) { c.Secret = "" }, "no signing secret"},
		{"bad secret", func(c *webhook.Config) { c.Secret = "whsec_not base64" }, "secret 1: webhook: invalid secret"},
		{"bad rotation secret", func(c *webhook.Config) { c.Secrets = []string{"whsec_"} }, "secret 2: webhook: invalid secret"},
		{"negative timeout", func(c *webhook.Config) { c.Timeout = -time.Second }, "negative timeout"},
		{"negative connections", func(c *webhook.Config) { c.Connections = -1 }, "negative connections"},
		{"bad static header", func(c *webhook.Config) { c.Headers = map[string]string{"X-A": "1\n2"} }, "static headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			tt.edit(&cfg)
			d, err := webhook.New(cfg)
			if tt.want == "" {
				require.NoError(t, err)
				require.NotNil(t, d)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// A destination whose concurrency is above the default keeps a connection
// per delivery in flight: every delivery of later rounds reuses one, where
// an idle pool smaller than the concurrency closed the connections past it
// after each round and opened them again for the next.
func TestDeliverKeepsAConnectionPerDeliveryInFlight(t *testing.T) {
	const connections, rounds = 3 * webhook.DefaultConnections, 3
	var opened atomic.Int64
	arrived := make(chan struct{})
	var mu sync.Mutex
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		released := release
		mu.Unlock()
		arrived <- struct{}{}
		<-released
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	d := newDest(t, srv.URL, func(cfg *webhook.Config) { cfg.Connections = connections })

	for round := range rounds {
		errs := make(chan error, connections)
		for i := range connections {
			go func() {
				_, err := d.Deliver(context.Background(), delivery(fmt.Sprintf("msg_%d_%d", round, i)))
				errs <- err
			}()
		}
		// Every delivery of the round holds a connection at once.
		for range connections {
			testwait.For(t, 5*time.Second, "a request", arrived)
		}
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
		for range connections {
			require.NoError(t, testwait.For(t, 5*time.Second, "a delivery", errs))
		}
	}
	assert.Equal(t, int64(connections), opened.Load(), "connections opened over %d rounds of %d deliveries at once", rounds, connections)
}
