package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// Collaborative triage (ARCHITECTURE.md) groups failures into triage
// items; reconciliation findings are one of its sources. This file is the
// seam: FindingGroups is the open drift grouped as triage will show it,
// one item per (check, kind), named by GroupFingerprint; the operator
// action action.Service.RepairFindings (internal/action) with a
// FindingFilter of the item's check and kind is its "repair all" (one
// outbox row per finding however often it is retried). When the triage
// package lands, its item builder reads FindingGroups, and its repair
// mutation calls that action; new findings and resolutions already reach the change
// feed as changefeed.KindReconcileFinding, subject the check's name.

// FindingGroup is the open drift of one kind in one check.
type FindingGroup struct {
	Check, Kind string
	Findings    int64
	FirstSeen   time.Time
	LastSeen    time.Time
	// SampleID is the oldest finding of the group.
	SampleID int64
}

// Fingerprint is the group's triage fingerprint.
func (g FindingGroup) Fingerprint() string { return GroupFingerprint(g.Check, g.Kind) }

// GroupFingerprint names the triage item of a check's findings of a kind.
func GroupFingerprint(check, kind string) string { return "reconcile:" + check + ":" + kind }

// FindingGroups returns the open drift grouped by check and kind.
func FindingGroups(ctx context.Context, db queries.DBTX) ([]FindingGroup, error) {
	rows, err := queries.New(db).ReconcileFindingGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: finding groups: %w", err)
	}
	out := make([]FindingGroup, len(rows))
	for i, r := range rows {
		out[i] = FindingGroup{Check: r.CheckName, Kind: r.Kind, Findings: r.Findings, FirstSeen: r.FirstSeenAt, LastSeen: r.LastSeenAt, SampleID: r.SampleID}
	}
	return out, nil
}
