package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/triage"
)

// Collaborative triage (internal/triage) groups failures into items; a
// check's findings of one kind are one item (triage.ReconcileFindings,
// ref GroupRef). The item is tracked in the transaction that records the
// batch's findings (record.go): created with the group's first finding,
// and reopened, if a person resolved or ignored it, when the group drifts
// again (a finding opens, or a resolved one reopens). Findings merely
// seen again do not touch it. The operator action
// action.Service.RepairFindings (internal/action) with a FindingFilter of
// the item's check and kind is its "repair all" (one outbox row per
// finding however often it is retried).

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

// GroupRef is the ref of the triage item of a check's findings of a kind:
// {"check": check, "kind": kind}.
func GroupRef(check, kind string) json.RawMessage {
	raw, _ := json.Marshal(map[string]string{"check": check, "kind": kind}) // strings always encode
	return raw
}

// kindLabels are the findings' kinds as a title says them.
var kindLabels = map[string]string{
	MissingRemote: "missing remotely",
	MissingLocal:  "missing locally",
	Mismatch:      "mismatched",
}

// GroupTitle is the title of a finding group's triage item.
func GroupTitle(check, kind string) string {
	label := kindLabels[kind]
	if label == "" {
		label = kind
	}
	return "Reconciliation " + check + ": entities " + label
}

// trackGroups tracks, in tx, the triage items of the groups a batch of
// cycle made drift (created, or reopened if settled).
func trackGroups(ctx context.Context, tx pgx.Tx, check string, cycle int64, drifted []queries.ReconcileFindingUpsertRow) error {
	for _, g := range drifted {
		why := "cycle " + strconv.FormatInt(cycle, 10) + ": " + strconv.FormatInt(g.Opened, 10) + " new"
		if g.Reopened > 0 {
			why += ", " + strconv.FormatInt(g.Reopened, 10) + " reopened"
		}
		why += " " + g.Kind + " findings"
		if err := triage.Track(ctx, tx, triage.ReconcileFindings, GroupRef(check, g.Kind), GroupTitle(check, g.Kind), why); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
	}
	return nil
}

// FindingGroups returns the open drift grouped by check and kind.
func FindingGroups(ctx context.Context, db queries.DBTX) ([]FindingGroup, error) {
	rows, err := queries.New(db).ReconcileFindingGroupList(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: finding groups: %w", err)
	}
	out := make([]FindingGroup, len(rows))
	for i, r := range rows {
		out[i] = FindingGroup{Check: r.CheckName, Kind: r.Kind, Findings: r.Findings, FirstSeen: r.FirstSeenAt, LastSeen: r.LastSeenAt, SampleID: r.SampleID}
	}
	return out, nil
}
