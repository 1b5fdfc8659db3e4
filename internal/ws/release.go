package ws

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/triage"
)

// releaseReason is the audit row's reason of a release on leaving.
const releaseReason = "the holder's page closed"

// releaseLater releases p's claim of item after ReleaseGrace, unless p
// looks at the item again by then, on any instance. It runs in the
// background until then; Stop cancels it (the claim then expires by its
// lease).
func (s *Server) releaseLater(p auth.Principal, item int64) {
	s.mu.Lock()
	ctx := s.ctx
	if ctx == nil || ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.running.Add(1) // under mu, as in Serve: Stop waits for it
	s.mu.Unlock()
	go func() {
		defer s.running.Done()
		grace := time.NewTimer(s.cfg.ReleaseGrace)
		defer grace.Stop()
		select {
		case <-ctx.Done():
			return
		case <-grace.C:
		}
		qctx, cancel := context.WithTimeout(ctx, s.cfg.MutationTimeout)
		defer cancel()
		if err := s.release(qctx, p, item); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("release the claim of a closed page", slog.Int64("item", item), slog.Any("error", err))
		}
	}()
}

// release releases p's claim of item, through the engine as a release
// mutation of p (event, audit row, change feed), if p still holds it and
// is not looking at the item. A change of the item meanwhile (stale) is
// read again, once.
func (s *Server) release(ctx context.Context, p auth.Principal, item int64) error {
	for range 2 {
		who, err := s.cfg.Presence.Who(ctx, []string{triage.ItemView(item)})
		if err != nil {
			return err
		}
		if slices.Contains(who[triage.ItemView(item)], p.Name) {
			return nil // back on it: a reload, or another of their pages
		}
		it, err := triage.Get(ctx, s.cfg.Engine.Pool, item)
		if errors.Is(err, triage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if it.ClaimHolderID == nil || *it.ClaimHolderID != p.UserID {
			return nil
		}
		a, err := s.cfg.Engine.Mutate(ctx, p, triage.Input{
			MutationID: uuid.New(), ItemID: item, Op: triage.OpRelease, SeenVersion: it.Version,
			Args: triage.Args{Reason: releaseReason},
		})
		if err != nil || a.Reason != triage.RejectStale {
			return err // released, or not theirs to release (expired, taken over)
		}
	}
	return nil
}
