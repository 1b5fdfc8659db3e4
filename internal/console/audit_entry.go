package console

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/web/templates"
)

// auditDetail is what the Audit page shows of a row's detail: a replay's
// mode (redeliver or re-apply) and the replay it created; a bulk job's
// mode and filter.
type auditDetail struct {
	Mode     string          `json:"mode"`
	ReplayID int64           `json:"replay_id"`
	Filter   json.RawMessage `json:"filter"`
}

// auditEntry maps one audit row to the page's view: the time as every
// other page shows it (UTC to the second), the target as a link to what
// it names, and the mode and filter read from the detail.
func auditEntry(r audit.Row) templates.AuditEntry {
	e := templates.AuditEntry{
		ID: r.ID, At: r.At.UTC().Format("2006-01-02 15:04:05"), Actor: r.Actor, Action: r.Action, Target: r.Target,
		TargetHref: auditTargetHref(r.Target), Reason: r.Reason, Outcome: string(r.Outcome),
		RequestID: r.RequestID, RemoteAddr: r.RemoteAddr,
	}
	var d auditDetail
	if len(r.Detail) == 0 || json.Unmarshal(r.Detail, &d) != nil {
		return e // a detail of another shape shows nothing more
	}
	switch d.Mode {
	case "redeliver":
		e.Mode = "redeliver"
	case "reapply":
		e.Mode = "re-apply"
	}
	if d.ReplayID > 0 {
		e.ReplayHref = "/messages/" + strconv.FormatInt(d.ReplayID, 10)
	}
	if len(d.Filter) > 0 && string(d.Filter) != "null" {
		e.Filter = string(d.Filter)
	}
	return e
}

// auditTargetHref links a target to the page of what it names: "message
// 42" to the message, "replay job <uuid>" to the bulk replay jobs; ""
// for targets without a page (accounts, sessions).
func auditTargetHref(target string) string {
	if id, ok := strings.CutPrefix(target, "message "); ok {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > 0 {
			return "/messages/" + id
		}
	}
	if id, ok := strings.CutPrefix(target, "replay job "); ok {
		if _, err := uuid.Parse(id); err == nil {
			return "/replays#job-" + id
		}
	}
	return ""
}
