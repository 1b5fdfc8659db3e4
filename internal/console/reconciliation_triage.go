package console

import "net/url"

// reconcileTracked is the page of the finding group a triage item of kind
// triage.ReconcileFindings tracks (ref {"check", "kind"},
// reconcile.GroupRef): the Reconciliation page filtered to the check's
// active findings of that kind.
func reconcileTracked(ref map[string]string) (href, label string) {
	if ref["check"] == "" {
		return "/reconciliation", "reconciliation findings"
	}
	q := url.Values{"check": {ref["check"]}}
	label = "findings of " + ref["check"]
	if ref["kind"] != "" {
		q.Set("kind", ref["kind"])
		label += " (" + ref["kind"] + ")"
	}
	return "/reconciliation?" + q.Encode(), label
}
