package console

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/internal/queries"
)

// The message list's access paths. Every list query takes the same
// filters (see internal/queries/sql/console_messages.sql); they differ in
// the index they walk, so the handler picks the one whose index fits the
// most selective filter: an aggregate, then pending (also a stage of the
// pending messages or their lease holder) or dead (small partial indexes),
// then topic or destination (a name or a prefix) among messages not
// delivered (a topic or destination prefix among dead letters on an index
// of their own), then discarded, error text, then delivered alone (the
// latest delivery first, on the index of delivery times: the primary key
// would read a whole backlog above the first delivered message); else the
// primary key (delivered messages under a filter no index serves, or a
// range of creation times or ids, in windows of ids: unindexedFilter).
// Their parameter structs are identical, hence the conversions.

type messagePath int

const (
	pathAll messagePath = iota
	pathAggregate
	pathPending
	pathDead
	pathDiscarded
	pathDelivered
	pathTopic
	pathTopicPrefix
	pathDeadTopicPrefix
	pathDestination
	pathDestinationPrefix
	pathDeadDestinationPrefix
	pathFailed
)

func choosePath(p queries.ConsoleMessagesListOlderParams) messagePath {
	switch {
	case p.AggregateType != nil && p.AggregateID != nil:
		return pathAggregate
	case p.State != nil && *p.State == "pending", pendingOnly(p):
		return pathPending
	case p.Topic != nil && undelivered(p.State):
		return pathTopic
	case p.TopicPrefix != nil && deadOnly(p.State):
		return pathDeadTopicPrefix
	case p.TopicPrefix != nil && undelivered(p.State):
		return pathTopicPrefix
	case p.Destination != nil && undelivered(p.State):
		return pathDestination
	case p.DestinationPrefix != nil && deadOnly(p.State):
		return pathDeadDestinationPrefix
	case p.DestinationPrefix != nil && undelivered(p.State):
		return pathDestinationPrefix
	case deadOnly(p.State):
		return pathDead
	case p.State != nil && *p.State == "discarded":
		return pathDiscarded
	case p.ErrorText != nil:
		return pathFailed
	case deliveredOnly(p.State) && !unindexedFilter(p):
		return pathDelivered
	}
	return pathAll
}

// messagesOlder reads the page below p.Cursor, newest first.
func messagesOlder(ctx context.Context, q *queries.Queries, p queries.ConsoleMessagesListOlderParams) ([]queries.SwitchyardConsoleMessage, error) {
	var rows []queries.SwitchyardConsoleMessage
	var err error
	switch choosePath(p) {
	case pathAggregate:
		rows, err = q.ConsoleMessagesListAggregateOlder(ctx, queries.ConsoleMessagesListAggregateOlderParams(p))
	case pathPending:
		rows, err = q.ConsoleMessagesListPendingOlder(ctx, queries.ConsoleMessagesListPendingOlderParams(p))
	case pathDead:
		rows, err = q.ConsoleMessagesListDeadOlder(ctx, queries.ConsoleMessagesListDeadOlderParams(p))
	case pathDiscarded:
		rows, err = q.ConsoleMessagesListDiscardedOlder(ctx, queries.ConsoleMessagesListDiscardedOlderParams(p))
	case pathDelivered:
		rows, err = q.ConsoleMessagesListDeliveredOlder(ctx, queries.ConsoleMessagesListDeliveredOlderParams(p))
	case pathTopic:
		rows, err = q.ConsoleMessagesListTopicOlder(ctx, queries.ConsoleMessagesListTopicOlderParams(p))
	case pathDestination:
		rows, err = q.ConsoleMessagesListDestinationOlder(ctx, queries.ConsoleMessagesListDestinationOlderParams(p))
	case pathTopicPrefix:
		rows, err = q.ConsoleMessagesListTopicPrefixOlder(ctx, queries.ConsoleMessagesListTopicPrefixOlderParams(prefixParams(p)))
	case pathDeadTopicPrefix:
		rows, err = q.ConsoleMessagesListDeadTopicPrefixOlder(ctx, queries.ConsoleMessagesListDeadTopicPrefixOlderParams(prefixParams(p)))
	case pathDestinationPrefix:
		rows, err = q.ConsoleMessagesListDestinationPrefixOlder(ctx, queries.ConsoleMessagesListDestinationPrefixOlderParams(prefixParams(p)))
	case pathDeadDestinationPrefix:
		rows, err = q.ConsoleMessagesListDeadDestinationPrefixOlder(ctx, queries.ConsoleMessagesListDeadDestinationPrefixOlderParams(prefixParams(p)))
	case pathFailed:
		rows, err = q.ConsoleMessagesListFailedOlder(ctx, queries.ConsoleMessagesListFailedOlderParams(p))
	default:
		rows, err = q.ConsoleMessagesListOlder(ctx, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return rows, nil
}

// messagesNewer reads the page above p.Cursor, oldest first.
func messagesNewer(ctx context.Context, q *queries.Queries, p queries.ConsoleMessagesListOlderParams) ([]queries.SwitchyardConsoleMessage, error) {
	var rows []queries.SwitchyardConsoleMessage
	var err error
	switch choosePath(p) {
	case pathAggregate:
		rows, err = q.ConsoleMessagesListAggregateNewer(ctx, queries.ConsoleMessagesListAggregateNewerParams(p))
	case pathPending:
		rows, err = q.ConsoleMessagesListPendingNewer(ctx, queries.ConsoleMessagesListPendingNewerParams(p))
	case pathDead:
		rows, err = q.ConsoleMessagesListDeadNewer(ctx, queries.ConsoleMessagesListDeadNewerParams(p))
	case pathDiscarded:
		rows, err = q.ConsoleMessagesListDiscardedNewer(ctx, queries.ConsoleMessagesListDiscardedNewerParams(p))
	case pathDelivered:
		rows, err = q.ConsoleMessagesListDeliveredNewer(ctx, queries.ConsoleMessagesListDeliveredNewerParams(p))
	case pathTopic:
		rows, err = q.ConsoleMessagesListTopicNewer(ctx, queries.ConsoleMessagesListTopicNewerParams(p))
	case pathDestination:
		rows, err = q.ConsoleMessagesListDestinationNewer(ctx, queries.ConsoleMessagesListDestinationNewerParams(p))
	case pathTopicPrefix:
		rows, err = q.ConsoleMessagesListTopicPrefixNewer(ctx, queries.ConsoleMessagesListTopicPrefixNewerParams(prefixParams(p)))
	case pathDeadTopicPrefix:
		rows, err = q.ConsoleMessagesListDeadTopicPrefixNewer(ctx, queries.ConsoleMessagesListDeadTopicPrefixNewerParams(prefixParams(p)))
	case pathDestinationPrefix:
		rows, err = q.ConsoleMessagesListDestinationPrefixNewer(ctx, queries.ConsoleMessagesListDestinationPrefixNewerParams(prefixParams(p)))
	case pathDeadDestinationPrefix:
		rows, err = q.ConsoleMessagesListDeadDestinationPrefixNewer(ctx, queries.ConsoleMessagesListDeadDestinationPrefixNewerParams(prefixParams(p)))
	case pathFailed:
		rows, err = q.ConsoleMessagesListFailedNewer(ctx, queries.ConsoleMessagesListFailedNewerParams(p))
	default:
		rows, err = q.ConsoleMessagesListNewer(ctx, queries.ConsoleMessagesListNewerParams(p))
	}
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return rows, nil
}

// pendingOnly reports whether p keeps to pending messages by their stage
// or lease holder, which only the pending messages' index serves (no index
// holds the lease: migrations/00020_console_leases.sql).
func pendingOnly(p queries.ConsoleMessagesListOlderParams) bool {
	return p.Stage != nil || p.LeaseOwnerPattern != nil
}

// deadOnly reports whether a state filter keeps to dead letters: dead, or
// dead and replayed since (both are stored as dead; console_messages.status).
func deadOnly(state *string) bool {
	return state != nil && (*state == "dead" || *state == "replayed")
}

// deliveredOnly reports whether a state filter keeps to delivered messages.
func deliveredOnly(state *string) bool {
	return state != nil && *state == "delivered"
}

// undelivered reports whether a state filter keeps to messages that are not
// delivered, the only ones the topic and destination indexes hold.
func undelivered(state *string) bool {
	return state != nil && *state != "delivered"
}

// prefixParams is p for the prefix queries, whose parameters are the same
// but named in another order (sqlc orders them as the query first uses
// them); the four are one struct type apart from their names.
func prefixParams(p queries.ConsoleMessagesListOlderParams) queries.ConsoleMessagesListTopicPrefixOlderParams {
	return queries.ConsoleMessagesListTopicPrefixOlderParams{
		State: p.State, Topic: p.Topic, TopicPrefix: p.TopicPrefix, TopicUpper: p.TopicUpper,
		Destination: p.Destination, DestinationPrefix: p.DestinationPrefix, DestinationUpper: p.DestinationUpper,
		AggregateType: p.AggregateType, AggregateID: p.AggregateID, ErrorText: p.ErrorText,
		CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, Stage: p.Stage, LeaseOwnerPattern: p.LeaseOwnerPattern,
		Floor: p.Floor, Ceiling: p.Ceiling, Cursor: p.Cursor, MaxRows: p.MaxRows,
	}
}
