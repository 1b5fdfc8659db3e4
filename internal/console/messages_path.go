package console

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/internal/queries"
)

// The message list's access paths. Every list query takes the same
// filters (see internal/queries/sql/console_messages.sql); they differ in
// the index they walk, so the handler picks the one whose index fits the
// most selective filter: an aggregate, then pending or dead (small partial
// indexes), then topic or destination among messages not delivered, and
// error text; else the primary key.
// Their parameter structs are identical, hence the conversions.

type messagePath int

const (
	pathAll messagePath = iota
	pathAggregate
	pathPending
	pathDead
	pathDiscarded
	pathTopic
	pathDestination
	pathFailed
)

func choosePath(p queries.ConsoleMessagesOlderParams) messagePath {
	switch {
	case p.AggregateType != nil && p.AggregateID != nil:
		return pathAggregate
	case p.State != nil && *p.State == "pending":
		return pathPending
	case p.Topic != nil && undelivered(p.State):
		return pathTopic
	case p.Destination != nil && undelivered(p.State):
		return pathDestination
	case p.State != nil && (*p.State == "dead" || *p.State == "replayed"):
		return pathDead // both are stored as dead (console_messages.status)
	case p.State != nil && *p.State == "discarded":
		return pathDiscarded
	case p.ErrorText != nil:
		return pathFailed
	}
	return pathAll
}

// messagesOlder reads the page below p.Cursor, newest first.
func messagesOlder(ctx context.Context, q *queries.Queries, p queries.ConsoleMessagesOlderParams) ([]queries.SwitchyardConsoleMessage, error) {
	var rows []queries.SwitchyardConsoleMessage
	var err error
	switch choosePath(p) {
	case pathAggregate:
		rows, err = q.ConsoleMessagesAggregateOlder(ctx, queries.ConsoleMessagesAggregateOlderParams(p))
	case pathPending:
		rows, err = q.ConsoleMessagesPendingOlder(ctx, queries.ConsoleMessagesPendingOlderParams(p))
	case pathDead:
		rows, err = q.ConsoleMessagesDeadOlder(ctx, queries.ConsoleMessagesDeadOlderParams(p))
	case pathDiscarded:
		rows, err = q.ConsoleMessagesDiscardedOlder(ctx, queries.ConsoleMessagesDiscardedOlderParams(p))
	case pathTopic:
		rows, err = q.ConsoleMessagesTopicOlder(ctx, queries.ConsoleMessagesTopicOlderParams(p))
	case pathDestination:
		rows, err = q.ConsoleMessagesDestinationOlder(ctx, queries.ConsoleMessagesDestinationOlderParams(p))
	case pathFailed:
		rows, err = q.ConsoleMessagesFailedOlder(ctx, queries.ConsoleMessagesFailedOlderParams(p))
	default:
		rows, err = q.ConsoleMessagesOlder(ctx, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return rows, nil
}

// messagesNewer reads the page above p.Cursor, oldest first.
func messagesNewer(ctx context.Context, q *queries.Queries, p queries.ConsoleMessagesOlderParams) ([]queries.SwitchyardConsoleMessage, error) {
	var rows []queries.SwitchyardConsoleMessage
	var err error
	switch choosePath(p) {
	case pathAggregate:
		rows, err = q.ConsoleMessagesAggregateNewer(ctx, queries.ConsoleMessagesAggregateNewerParams(p))
	case pathPending:
		rows, err = q.ConsoleMessagesPendingNewer(ctx, queries.ConsoleMessagesPendingNewerParams(p))
	case pathDead:
		rows, err = q.ConsoleMessagesDeadNewer(ctx, queries.ConsoleMessagesDeadNewerParams(p))
	case pathDiscarded:
		rows, err = q.ConsoleMessagesDiscardedNewer(ctx, queries.ConsoleMessagesDiscardedNewerParams(p))
	case pathTopic:
		rows, err = q.ConsoleMessagesTopicNewer(ctx, queries.ConsoleMessagesTopicNewerParams(p))
	case pathDestination:
		rows, err = q.ConsoleMessagesDestinationNewer(ctx, queries.ConsoleMessagesDestinationNewerParams(p))
	case pathFailed:
		rows, err = q.ConsoleMessagesFailedNewer(ctx, queries.ConsoleMessagesFailedNewerParams(p))
	default:
		rows, err = q.ConsoleMessagesNewer(ctx, queries.ConsoleMessagesNewerParams(p))
	}
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return rows, nil
}

// undelivered reports whether a state filter keeps to messages that are not
// delivered, the only ones the topic and destination indexes hold.
func undelivered(state *string) bool {
	return state != nil && *state != "delivered"
}
