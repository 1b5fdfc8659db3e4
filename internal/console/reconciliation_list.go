package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// findingsShown is how many findings the Reconciliation page lists per page.
const findingsShown = 100

// cyclesShown is how many recent cycles it lists.
const cyclesShown = 10

// reconciliationList is GET /reconciliation: checks, their cycles (a
// running one with its progress), and findings, filtered.
func (h *Handler) reconciliationList(c echo.Context) error {
	v, err := h.reconcileView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.ReconciliationPage(h.page("Reconciliation", templates.SectionReconciliation), v))
}

// reconciliationLive is GET /reconciliation/live: the page's live region,
// re-fetched on every reconciliation change.
func (h *Handler) reconciliationLive(c echo.Context) error {
	v, err := h.reconcileView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.ReconcileLive(v))
}

// reconciliationDrift is GET /reconciliation/drift: the dashboard's open
// drift per check.
func (h *Handler) reconciliationDrift(c echo.Context) error {
	if h.deps.DB == nil {
		return render(c, http.StatusOK, templates.DashboardDrift(nil))
	}
	checks, err := queries.New(h.deps.DB).ReconcileCheckListSummaries(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.DashboardDrift(checkViews(checks)))
}

func (h *Handler) reconcileView(c echo.Context) (templates.ReconcileView, error) {
	if h.deps.DB == nil {
		return templates.ReconcileView{}, echo.NewHTTPError(http.StatusServiceUnavailable, "Reconciliation is unavailable: this console has no database.")
	}
	ctx, q := c.Request().Context(), queries.New(h.deps.DB)
	f := templates.ReconcileFilter{Check: c.QueryParam("check"), Kind: c.QueryParam("kind"), Status: "active"}
	if s, ok := c.QueryParams()["status"]; ok {
		f.Status = s[0]
	}
	f.Before, _ = strconv.ParseInt(c.QueryParam("before"), 10, 64)
	checks, err := q.ReconcileCheckListSummaries(ctx)
	if err != nil {
		return templates.ReconcileView{}, err
	}
	cycles, err := q.ReconcileCycleListRecent(ctx, cyclesShown)
	if err != nil {
		return templates.ReconcileView{}, err
	}
	before := f.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := q.ReconcileFindingListPage(ctx, queries.ReconcileFindingListPageParams{
		CheckName: f.Check, Kind: f.Kind, Status: f.Status, BeforeID: before, RowLimit: findingsShown + 1,
	})
	if err != nil {
		return templates.ReconcileView{}, err
	}
	v := templates.ReconcileView{Filter: f, Checks: checkViews(checks), Cycles: cycleViews(cycles),
		CanOperate: current(c).Role.Allows(auth.Operator), RequestID: uuid.NewString()}
	if v.RepairJobs, err = h.repairJobViews(c); err != nil {
		return templates.ReconcileView{}, err
	}
	if v.CanOperate && f.Check != "" {
		// The bulk repair's estimate: the open findings it would repair
		// (those repair_requested already are not repaired again).
		if v.Open, err = q.RepairJobEstimate(ctx, queries.RepairJobEstimateParams{CheckName: f.Check, Kind: f.Kind, Cap: bulkreplay.MaxEstimate}); err != nil {
			return templates.ReconcileView{}, err
		}
	}
	if len(rows) > findingsShown {
		rows = rows[:findingsShown]
		v.NextBefore = rows[len(rows)-1].ID
	}
	for _, r := range rows {
		v.Findings = append(v.Findings, templates.ReconcileFindingRow{ID: r.ID, Check: r.CheckName, Key: r.Key, Kind: r.Kind,
			Status: r.Status, First: utc(r.FirstSeenAt), LastSeen: utc(r.LastSeenAt)})
	}
	return v, nil
}

func checkViews(rows []queries.ReconcileCheckListSummariesRow) []templates.ReconcileCheck {
	out := make([]templates.ReconcileCheck, len(rows))
	for i, r := range rows {
		out[i] = templates.ReconcileCheck{Name: r.Name, Kind: r.Kind, Enabled: r.Enabled, CycleID: r.CycleID, CycleState: r.CycleState,
			Started: utc(r.StartedAt), Duration: duration(r.StartedAt, r.FinishedAt, r.UpdatedAt),
			Estimate: r.Estimate, Examined: r.Examined, MissingRemote: r.MissingRemote, MissingLocal: r.MissingLocal,
			Mismatch: r.Mismatch, Unknown: r.Unknown, OpenFindings: r.OpenFindings, NextCycle: utc(r.NextCycleAt)}
	}
	return out
}

func cycleViews(rows []queries.ReconcileCycleListRecentRow) []templates.ReconcileCycle {
	out := make([]templates.ReconcileCycle, len(rows))
	for i, r := range rows {
		out[i] = templates.ReconcileCycle{ID: r.ID, Check: r.CheckName, State: r.State, Started: utc(r.StartedAt),
			Duration: duration(r.StartedAt, r.FinishedAt, r.StartedAt), Examined: r.Examined, Estimate: r.Estimate, InSync: r.InSync,
			MissingRemote: r.MissingRemote, MissingLocal: r.MissingLocal, Mismatch: r.Mismatch, Unknown: r.Unknown,
			Runs: r.Runs, Unexamined: string(r.Unexamined)}
	}
	return out
}

// duration is a cycle's duration: to its end, or "running" (so far, to
// its last batch).
func duration(start time.Time, end *time.Time, last time.Time) string {
	if end == nil {
		if last.After(start) {
			return "running for " + last.Sub(start).Round(time.Second).String()
		}
		return "running"
	}
	return end.Sub(start).Round(time.Millisecond).String()
}

func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }
