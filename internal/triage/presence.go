package triage

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/queries"
)

// BoardView is the presence view of the triage board; ItemView names an
// item page's.
const BoardView = "board"

// ItemView is the presence view of item id's page.
func ItemView(id int64) string { return "item:" + strconv.FormatInt(id, 10) }

// Presence records who looks at which view, across every console
// instance (migrations/00013_triage.sql). Each open connection
// joins a view and refreshes its row more often than TTL; a row not
// refreshed for TTL (its tab or instance died) is deleted by the next
// Sweep of any instance. Every change of who is in a view is announced on
// the change feed (changefeed.KindPresence) in the transaction that makes
// it; a refresh changes nobody and announces nothing.
type Presence struct {
	Pool *pgxpool.Pool
	// Instance names this console process in the rows (for debugging).
	Instance string
	// TTL is how long a row lives without a refresh. Default 30s, so a
	// dead tab is gone within TTL plus one sweep interval.
	TTL time.Duration
	// Now, if set, replaces the database clock (tests).
	Now func() *time.Time
	// Notify wakes the change feed after a commit; nil: changefeed.Notify.
	Notify func()
	Logger *slog.Logger
}

// DefaultPresenceTTL is Presence.TTL's default.
const DefaultPresenceTTL = 30 * time.Second

func (pr *Presence) ttl() float64 {
	if pr.TTL <= 0 {
		return DefaultPresenceTTL.Seconds()
	}
	return pr.TTL.Seconds()
}

func (pr *Presence) now() *time.Time {
	if pr.Now == nil {
		return nil
	}
	return pr.Now()
}

// Join puts connection conn of p in view (moving it from any other).
func (pr *Presence) Join(ctx context.Context, conn uuid.UUID, p auth.Principal, view string) error {
	return pr.announcing(ctx, func(q *queries.Queries) ([]string, error) {
		old, err := q.TriagePresenceJoin(ctx, queries.TriagePresenceJoinParams{
			ConnID: conn, Instance: pr.Instance, AccountID: p.UserID, AccountName: p.Name, View: view,
			Now: pr.now(), TtlSeconds: pr.ttl(),
		})
		if old == view {
			return []string{view}, err // a rejoin after a sweep is news too
		}
		return []string{old, view}, err
	})
}

// Refresh extends conn's presence in view, joining again if a sweep
// removed it meanwhile (a long pause of this process).
func (pr *Presence) Refresh(ctx context.Context, conn uuid.UUID, p auth.Principal, view string) error {
	n, err := queries.New(pr.Pool).TriagePresenceRefresh(ctx, queries.TriagePresenceRefreshParams{Now: pr.now(), TtlSeconds: pr.ttl(), ConnID: conn})
	if err != nil {
		return fmt.Errorf("triage: refresh presence: %w", err)
	}
	if n == 0 {
		return pr.Join(ctx, conn, p, view)
	}
	return nil
}

// Leave removes conn's presence (its socket closed).
func (pr *Presence) Leave(ctx context.Context, conn uuid.UUID) error {
	return pr.announcing(ctx, func(q *queries.Queries) ([]string, error) {
		return q.TriagePresenceLeave(ctx, conn)
	})
}

// Sweep deletes expired presence, announcing the views it changed.
func (pr *Presence) Sweep(ctx context.Context) error {
	return pr.announcing(ctx, func(q *queries.Queries) ([]string, error) {
		return q.TriagePresenceSweep(ctx, pr.now())
	})
}

// Who returns the names of the accounts looking at each of views.
func (pr *Presence) Who(ctx context.Context, views []string) (map[string][]string, error) {
	rows, err := queries.New(pr.Pool).TriagePresenceList(ctx, queries.TriagePresenceListParams{Views: views, Now: pr.now()})
	if err != nil {
		return nil, fmt.Errorf("triage: who is present: %w", err)
	}
	who := make(map[string][]string, len(views))
	for _, v := range views {
		who[v] = []string{}
	}
	for _, r := range rows {
		who[r.View] = append(who[r.View], r.AccountName)
	}
	return who, nil
}

// announcing runs change in a transaction and appends a KindPresence row
// for each view it returns, then wakes the feed after the commit.
func (pr *Presence) announcing(ctx context.Context, change func(q *queries.Queries) ([]string, error)) error {
	changed := 0
	err := pgx.BeginFunc(ctx, pr.Pool, func(tx pgx.Tx) error {
		views, err := change(queries.New(tx))
		if err != nil {
			return err
		}
		for _, v := range views {
			if v == "" {
				continue
			}
			if err := changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindPresence, Subject: v}); err != nil {
				return err
			}
			changed++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("triage: presence: %w", err)
	}
	if changed > 0 {
		if pr.Notify != nil {
			pr.Notify()
		} else if err := changefeed.Notify(ctx, pr.Pool); err != nil && pr.Logger != nil {
			pr.Logger.Warn("wake the change feed after a presence change", slog.Any("error", err))
		}
	}
	return nil
}
