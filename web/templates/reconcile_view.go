package templates

import (
	"net/url"
	"strconv"

	"github.com/a-h/templ"
)

// ReconcileView is the Reconciliation page: checks with their newest
// cycle, recent cycles, and findings with filters.
type ReconcileView struct {
	Checks   []ReconcileCheck
	Cycles   []ReconcileCycle
	Findings []ReconcileFindingRow
	Filter   ReconcileFilter
	// NextBefore, when not 0, is the keyset cursor of the next page.
	NextBefore int64
	// CanOperate shows the bulk repair of the filtered check's open
	// findings, Open of them (the estimate), when a check is chosen.
	CanOperate bool
	Open       int64
	// RequestID is the bulk repair form's request id (one per render).
	RequestID string
	// RepairJobs is the newest bulk repair jobs.
	RepairJobs []RepairJob
}

// RepairJob is a bulk repair job (a bulk replay job of kind repair).
type RepairJob struct {
	ID, State, Filter, Actor, Started string
	Repaired, Skipped, Estimate       int64
	// CancelRequestID is the cancel form's request id.
	CancelRequestID string
}

// ReconcileFilter is the findings list's filter (query parameters).
type ReconcileFilter struct {
	Check, Kind, Status string
	Before              int64
}

// Query is the filter as a query string, before excluded.
func (f ReconcileFilter) Query() string {
	v := url.Values{}
	for k, s := range map[string]string{"check": f.Check, "kind": f.Kind, "status": f.Status} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// LiveURL is the live region's URL for this filter.
func (f ReconcileFilter) LiveURL() string {
	q := f.Query()
	if f.Before > 0 {
		if q != "" {
			q += "&"
		}
		q += "before=" + strconv.FormatInt(f.Before, 10)
	}
	if q == "" {
		return "/reconciliation/live"
	}
	return "/reconciliation/live?" + q
}

// ReconcileCheck is one check and its newest cycle.
type ReconcileCheck struct {
	Name, Kind                      string
	Enabled                         bool
	CycleID                         int64
	CycleState                      string // "" before the first cycle
	Started, Finished, Duration     string
	Estimate, Examined              int64
	MissingRemote, MissingLocal     int64
	Mismatch, Unknown, OpenFindings int64
	NextCycle                       string
}

// ReconcileCycle is one recent cycle.
type ReconcileCycle struct {
	ID                                             int64
	Check, State, Started, Duration                string
	Examined, Estimate, InSync                     int64
	MissingRemote, MissingLocal, Mismatch, Unknown int64
	Runs                                           int32
	Unexamined                                     string // the ranges not examined, as JSON; "[]" none
}

// ReconcileFindingRow is one finding in the list.
type ReconcileFindingRow struct {
	ID                      int64
	Check, Key, Kind        string
	Status, First, LastSeen string
}

// ReconcileFindingView is one finding's page.
type ReconcileFindingView struct {
	ID                          int64
	Check, CheckKind, Key, Kind string
	Status                      string
	FirstSeen, LastSeen         string
	Resolved                    string
	Diff                        []FieldDiff
	Ref                         int64 // the message of a delivery finding; 0 none
	RepairMessage               int64 // the repair's outbox row; 0 none
	Events                      []FindingEvent
	CanOperate, CanRepair       bool
}

// FieldDiff is one mismatched field, its values as JSON text.
type FieldDiff struct{ Field, Local, Remote string }

// FindingEvent is one entry of a finding's history.
type FindingEvent struct{ At, Event, Actor, Reason, Cycle string }

// progressMax is a progress bar's maximum: the estimate, or what was done
// if more, and at least 1.
func progressMax(estimate, done int64) string {
	return strconv.FormatInt(max(estimate, done, 1), 10)
}

func findingURL(id int64) templ.SafeURL {
	return templ.SafeURL("/reconciliation/findings/" + strconv.FormatInt(id, 10))
}

func cycleClass(state string) string {
	switch state {
	case "complete":
		return "badge ok"
	case "running":
		return "badge warn"
	case "incomplete":
		return "badge bad"
	}
	return "badge"
}
