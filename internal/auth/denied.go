package auth

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/pgtext"
	"github.com/switchyard/switchyard/internal/queries"
)

// Denial is a request refused because of the principal's role.
type Denial struct {
	// Target is what was asked, e.g. "POST /messages/12/actions/replay".
	Target string
	// Route is the route template; Need the least role it wants.
	Route string
	Need  Role
	// RequestID is the request's id (its Idempotency-Key), if it sent one.
	RequestID  string
	RemoteAddr string
}

// maxDeniedTarget bounds what a refused request may write into the trail:
// its path is the requester's to choose.
const maxDeniedTarget = 200

// RecordDenied records in the audit trail that p was refused d (outcome
// audit.Denied): an operator action tried by a viewer is worth knowing.
// A signed-in account could send refused requests in a loop to flood the
// hash-chained trail, so each session is recorded at most once per
// Config.DeniedAuditInterval; the refusals in between are counted (in the
// session's row, so across instances) and the next recorded one reports
// them in its detail as "unaudited". It returns whether a row was
// written. Only sessions are recorded: the demo admin is never refused.
func (s *Service) RecordDenied(ctx context.Context, p Principal, d Denial) (bool, error) {
	if p.SessionID == 0 {
		return false, nil
	}
	// Valid UTF-8 without NUL, cut at a character boundary: the database
	// refuses anything else, and the refusal would go unrecorded.
	d.Target = pgtext.Clean(d.Target, maxDeniedTarget)
	var recorded bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		count, err := queries.New(tx).SessionDenialCount(ctx, queries.SessionDenialCountParams{
			ID: p.SessionID, IntervalSeconds: s.cfg.DeniedAuditInterval.Seconds(),
		})
		if err != nil || !count.Due {
			return err
		}
		detail, err := json.Marshal(map[string]any{"route": d.Route, "role": p.Role.String(), "need": d.Need.String(), "unaudited": count.Unaudited})
		if err != nil {
			return err
		}
		recorded = true
		_, err = audit.Record(ctx, tx, audit.Entry{
			Actor: p.Name, ActorID: p.ActorID(), Action: audit.ActionAccessDenied, Target: d.Target,
			Outcome: audit.Denied, RequestID: d.RequestID, RemoteAddr: d.RemoteAddr, Detail: detail,
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("auth: record refusal of %s for %q: %w", d.Target, p.Name, err)
	}
	return recorded, nil
}
