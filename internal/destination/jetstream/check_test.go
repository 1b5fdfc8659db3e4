package jetstream_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/jetstream"
)

// TestCheckCaptureTellsCapturedFromNot: a prefix whose subjects a stream
// captures passes; one no stream captures, or one a stream captures only
// some topics of, is reported with the subject and the streams.
func TestCheckCaptureTellsCapturedFromNot(t *testing.T) {
	t.Parallel()
	prefix := "sycheck." + strings.ToLower(rand.Text())
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	stream := func(name string, subjects ...string) {
		_, err := js.CreateStream(t.Context(), natsjs.StreamConfig{Name: name, Subjects: subjects, Storage: natsjs.MemoryStorage})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			assert.NoError(t, js.DeleteStream(ctx, name))
		})
	}
	id := rand.Text()
	stream("SYCHECK_ALL_"+id, prefix+".all.>")
	stream("SYCHECK_SOME_"+id, prefix+".some.created", prefix+".some.paid")

	check := func(p string) error {
		return jetstream.CheckCapture(t.Context(), jetstream.Config{URL: natsURL, SubjectPrefix: p})
	}
	require.NoError(t, check(prefix+".all"))
	require.NoError(t, check(prefix+".all.eu"), "a stream on a.> captures a.b.>")

	err = check(prefix + ".none")
	require.Error(t, err)
	require.Contains(t, err.Error(), "no stream captures "+prefix+".none.>")

	err = check(prefix + ".some")
	require.Error(t, err)
	require.Contains(t, err.Error(), "only some topics")
	require.Contains(t, err.Error(), "SYCHECK_SOME_"+id)
}

// TestCheckCaptureReportsAnUnreachableServerWithinItsTimeout: no NATS
// at the address is an error, returned within the short timeout.
func TestCheckCaptureReportsAnUnreachableServerWithinItsTimeout(t *testing.T) {
	t.Parallel()
	start := time.Now()
	err := jetstream.CheckCapture(t.Context(), jetstream.Config{URL: "nats://127.0.0.1:1", SubjectPrefix: "orders"})
	require.Error(t, err)
	require.Less(t, time.Since(start), jetstream.DefaultCheckTimeout+2*time.Second)
}

func TestSubjectCovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		filter, subject string
		want            bool
	}{
		{"orders.>", "orders.>", true},
		{"orders.>", "orders.eu.>", true},
		{">", "orders.>", true},
		{"orders.*", "orders.>", false},
		{"orders.*.>", "orders.>", false},
		{"*.>", "orders.>", true},
		{"orders.created", "orders.>", false},
		{"orders.>", "order.>", false},
		{"orders", "orders.>", false},
		{"orders.*", "orders.created", true},
	} {
		assert.Equal(t, c.want, jetstream.SubjectCovers(c.filter, c.subject), "%s covers %s", c.filter, c.subject)
	}
}
