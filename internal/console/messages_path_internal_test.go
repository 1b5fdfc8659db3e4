package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/queries"
)

// Each filter walks the index that fits it best. A topic or destination
// prefix among dead letters (dead, or dead and replayed since) walks their
// own index: on the index of every undelivered message, each topic or
// destination of the prefix cost a walk of its backlog. Delivered messages
// alone walk the index of delivery times: on the primary key, a page read
// the whole backlog above the first delivered message. Under a filter no
// index serves, or in a range of ids, they walk windows of the primary
// key: their index is in delivery order, not in id order.
func TestMessageListPathsFitTheirFilters(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		name string
		p    queries.ConsoleMessagesListOlderParams
		want messagePath
	}{
		{"dead, a topic prefix", queries.ConsoleMessagesListOlderParams{State: s("dead"), TopicPrefix: s("order.")}, pathDeadTopicPrefix},
		{"replayed, a topic prefix", queries.ConsoleMessagesListOlderParams{State: s("replayed"), TopicPrefix: s("order.")}, pathDeadTopicPrefix},
		{"discarded, a topic prefix", queries.ConsoleMessagesListOlderParams{State: s("discarded"), TopicPrefix: s("order.")}, pathTopicPrefix},
		{"pending, a topic prefix", queries.ConsoleMessagesListOlderParams{State: s("pending"), TopicPrefix: s("order.")}, pathPending},
		{"dead, a topic", queries.ConsoleMessagesListOlderParams{State: s("dead"), Topic: s("order.paid")}, pathTopic},
		{"dead", queries.ConsoleMessagesListOlderParams{State: s("dead")}, pathDead},
		{"replayed", queries.ConsoleMessagesListOlderParams{State: s("replayed")}, pathDead},
		{"dead, a destination prefix", queries.ConsoleMessagesListOlderParams{State: s("dead"), DestinationPrefix: s("shop-")}, pathDeadDestinationPrefix},
		{"replayed, a destination prefix", queries.ConsoleMessagesListOlderParams{State: s("replayed"), DestinationPrefix: s("shop-")}, pathDeadDestinationPrefix},
		{"dead, topic and destination prefixes", queries.ConsoleMessagesListOlderParams{State: s("dead"), TopicPrefix: s("order."), DestinationPrefix: s("shop-")}, pathDeadTopicPrefix},
		{"discarded, a destination prefix", queries.ConsoleMessagesListOlderParams{State: s("discarded"), DestinationPrefix: s("shop-")}, pathDestinationPrefix},
		{"delivered", queries.ConsoleMessagesListOlderParams{State: s("delivered"), Ceiling: msgfilter.NoCeiling}, pathDelivered},
		{"delivered, a topic", queries.ConsoleMessagesListOlderParams{State: s("delivered"), Topic: s("order.paid"), Ceiling: msgfilter.NoCeiling}, pathAll},
		{"delivered, created since", queries.ConsoleMessagesListOlderParams{State: s("delivered"), Floor: 1000, Ceiling: msgfilter.NoCeiling}, pathAll},
		{"delivered, created before", queries.ConsoleMessagesListOlderParams{State: s("delivered"), Ceiling: 1000}, pathAll},
		{"delivered, an error text", queries.ConsoleMessagesListOlderParams{State: s("delivered"), ErrorText: s("timeout")}, pathFailed},
		{"a topic prefix alone", queries.ConsoleMessagesListOlderParams{TopicPrefix: s("order.")}, pathAll},
	} {
		require.Equal(t, c.want, choosePath(c.p), c.name)
	}
}
