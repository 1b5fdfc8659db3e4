package jetstream_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/jetstream"
	"github.com/switchyard/switchyard/internal/testwait"
)

// fixture is one test's stream and a destination publishing into it.
type fixture struct {
	dest   *jetstream.Destination
	nc     *nats.Conn // the test's own connection, for inspection
	stream natsjs.Stream
	prefix string // captured by stream as prefix + ".>"
}

// setup creates a uniquely named memory stream on a unique subject prefix
// and a destination for it; cleanup deletes the stream and closes both
// connections.
func setup(t *testing.T, edit func(*jetstream.Config)) fixture {
	t.Helper()
	id := rand.Text()
	f := fixture{prefix: "sytest." + strings.ToLower(id)}
	var err error
	f.nc, err = nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(f.nc.Close)
	js, err := natsjs.New(f.nc)
	require.NoError(t, err)
	f.stream, err = js.CreateStream(t.Context(), natsjs.StreamConfig{
		Name: "SYTEST_" + id, Subjects: []string{f.prefix + ".>"},
		Storage: natsjs.MemoryStorage, Duplicates: time.Minute,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, js.DeleteStream(ctx, "SYTEST_"+id))
	})
	f.dest = newDest(t, f.prefix, edit)
	return f
}

// newDest connects a destination for prefix, closed in cleanup.
func newDest(t *testing.T, prefix string, edit func(*jetstream.Config)) *jetstream.Destination {
	t.Helper()
	cfg := jetstream.Config{URL: natsURL, SubjectPrefix: prefix}
	if edit != nil {
		edit(&cfg)
	}
	d, err := jetstream.New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

// msgs reports how many messages the stream holds.
func (f fixture) msgs(t *testing.T) uint64 {
	t.Helper()
	info, err := f.stream.Info(t.Context())
	require.NoError(t, err)
	return info.State.Msgs
}

func delivery(id string) destination.Delivery {
	return destination.Delivery{MessageID: id, Topic: "order.created", Payload: []byte(`{"order":42}`), Attempt: 1}
}

// TestDeliverOncePerID: each delivery published, then retried three
// times, is stored once; the retries are acknowledged as duplicates of the
// first publish.
func TestDeliverOncePerID(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	const distinct = 5
	for i := range distinct {
		m := delivery(fmt.Sprintf("msg_%d", i))
		first, err := f.dest.Publish(t.Context(), m)
		require.NoError(t, err)
		require.False(t, first.Duplicate)
		for attempt := 2; attempt <= 4; attempt++ {
			m.Attempt = attempt
			ack, err := f.dest.Publish(t.Context(), m)
			require.NoError(t, err)
			assert.True(t, ack.Duplicate, "attempt %d of %s", attempt, m.MessageID)
			assert.Equal(t, first.Sequence, ack.Sequence)
		}
	}
	assert.Equal(t, uint64(distinct), f.msgs(t))

	out, err := f.dest.Deliver(t.Context(), delivery("msg_0"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("stream %s seq 1 (duplicate)", f.stream.CachedInfo().Config.Name), out.Response)
	assert.Zero(t, out.StatusCode)
	assert.Equal(t, uint64(distinct), f.msgs(t))
}

// TestDeliverHeaders: the payload arrives on prefix.topic with the
// message's headers and the message id as Nats-Msg-Id, which a message
// header cannot forge.
func TestDeliverHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	m := delivery("msg_h")
	m.Headers = map[string]string{"Traceparent": "00-abc-def-01", "X-Tenant": "t1", "nats-msg-id": "forged"}

	out, err := f.dest.Deliver(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("stream %s seq 1", f.stream.CachedInfo().Config.Name), out.Response)

	got, err := f.stream.GetMsg(t.Context(), 1)
	require.NoError(t, err)
	assert.Equal(t, f.prefix+".order.created", got.Subject)
	assert.JSONEq(t, `{"order":42}`, string(got.Data))
	assert.Equal(t, "00-abc-def-01", got.Header.Get("Traceparent"))
	assert.Equal(t, "t1", got.Header.Get("X-Tenant"))
	assert.Equal(t, []string{"msg_h"}, got.Header.Values(natsjs.MsgIDHeader))
	assert.Empty(t, got.Header.Values("nats-msg-id"))
}

// TestDeliverNoStream: a subject no stream captures is a permanent error.
func TestDeliverNoStream(t *testing.T) {
	t.Parallel()
	prefix := "sytest.nostream." + strings.ToLower(rand.Text())
	d := newDest(t, prefix, nil)

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.Error(t, err)
	assert.True(t, destination.IsPermanent(err), "%v", err)
	assert.ErrorIs(t, err, natsjs.ErrNoStreamResponse)
	assert.Contains(t, err.Error(), "publish to "+prefix+".order.created: no stream captures this subject")
}

// blackHole subscribes to prefix.> as a plain NATS subscriber that never
// answers, so a publish waits for a PubAck that does not come. The
// returned channel receives once per message arrived.
func blackHole(t *testing.T, prefix string) <-chan struct{} {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	arrived := make(chan struct{}, 16)
	_, err = nc.Subscribe(prefix+".>", func(*nats.Msg) { arrived <- struct{}{} })
	require.NoError(t, err)
	require.NoError(t, nc.Flush()) // the subscription is in place
	return arrived
}

func TestDeliverHonoursCancel(t *testing.T) {
	t.Parallel()
	prefix := "sytest.blackhole." + strings.ToLower(rand.Text())
	arrived := blackHole(t, prefix)
	d := newDest(t, prefix, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()

	_, err := d.Deliver(ctx, delivery("msg_1"))
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, destination.IsPermanent(err))
}

func TestDeliverTimeout(t *testing.T) {
	t.Parallel()
	prefix := "sytest.blackhole." + strings.ToLower(rand.Text())
	arrived := blackHole(t, prefix)
	d := newDest(t, prefix, func(c *jetstream.Config) { c.Timeout = 50 * time.Millisecond })

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.Error(t, err)
	assert.False(t, destination.IsPermanent(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "publish to "+prefix+".order.created: no PubAck within 50ms")
	testwait.For(t, 5*time.Second, "the publish to reach the black hole", arrived)
}

// TestDeliverRefusesBadMessage: nothing is published and the error is
// permanent.
func TestDeliverRefusesBadMessage(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	tests := []struct {
		name string
		edit func(*destination.Delivery)
		want string
	}{
		{"invalid JSON", func(m *destination.Delivery) { m.Payload = []byte(`{"order":`) }, "invalid payload: not valid JSON"},
		{"no message id", func(m *destination.Delivery) { m.MessageID = "" }, "message has no id"},
		{"empty topic", func(m *destination.Delivery) { m.Topic = "" }, "empty subject token"},
		{"empty topic token", func(m *destination.Delivery) { m.Topic = "order..created" }, "empty subject token"},
		{"wildcard topic", func(m *destination.Delivery) { m.Topic = "order.>" }, `wildcard token ">"`},
		{"space in topic", func(m *destination.Delivery) { m.Topic = "order created" }, "whitespace in subject"},
		{"bad header name", func(m *destination.Delivery) { m.Headers = map[string]string{"X:Bad": "v"} }, `invalid header name "X:Bad"`},
	}
	for _, tt := range tests { // sequential: the count below follows them
		t.Run(tt.name, func(t *testing.T) {
			m := delivery("msg_1")
			tt.edit(&m)
			_, err := f.dest.Deliver(t.Context(), m)
			require.Error(t, err)
			assert.True(t, destination.IsPermanent(err), "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.Zero(t, f.msgs(t))
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  jetstream.Config
		want string
	}{
		{"no prefix", jetstream.Config{}, `subject prefix "": empty subject token`},
		{"wildcard prefix", jetstream.Config{SubjectPrefix: "outbox.*"}, `wildcard token "*"`},
		{"negative timeout", jetstream.Config{SubjectPrefix: "outbox", Timeout: -time.Second}, "negative timeout"},
		{"nothing listening", jetstream.Config{URL: "nats://user:pw@127.0.0.1:1", SubjectPrefix: "outbox"},
			"jetstream: connect to nats://user:xxxxx@127.0.0.1:1: "},
		{"token hidden", jetstream.Config{URL: "nats://s3cret@127.0.0.1:1", SubjectPrefix: "outbox"},
			"jetstream: connect to nats://xxxxx@127.0.0.1:1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := jetstream.New(t.Context(), tt.cfg)
			require.ErrorContains(t, err, tt.want)
			assert.Nil(t, d)
		})
	}
}

// TestNewHonoursContext: an ended context stops New before it connects.
func TestNewHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := jetstream.New(ctx, jetstream.Config{SubjectPrefix: "outbox"})
	require.ErrorIs(t, err, context.Canceled)
}
