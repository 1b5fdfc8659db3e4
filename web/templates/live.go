package templates

import (
	"net/url"
	"strings"

	"github.com/a-h/templ"
)

// Live describes one live region (LiveRegion).
type Live struct {
	// Kinds are the change kinds the region shows (changefeed's Kind
	// constants; a test holds the templates to them).
	Kinds []string
	// Subjects, when set, narrows the stream to changes of these subjects
	// (one message's page asks for its own message only).
	Subjects []string
	// Also are further hx-trigger specifications ("every 10s").
	Also []string
	// Attrs are the region element's attributes: at least hx-get; hx-swap,
	// hx-select, id and data-testid as the region needs. Not hx-trigger:
	// LiveRegion sets it.
	Attrs templ.Attributes
}

// always are the events every live region refreshes on, whatever its
// kinds: the stream (re)connected, the stream asks for a resync, the tab
// became visible (or hidden: a cheap extra read, since the CSP leaves
// htmx no way to evaluate a trigger filter).
var always = []string{"sse:ready", "sse:resync", "visibilitychange from:document"}

// Stream is the region's /events URL.
func (r Live) Stream() string {
	q := url.Values{"kind": r.Kinds}
	if len(r.Subjects) > 0 {
		q["subject"] = r.Subjects
	}
	return "/events?" + q.Encode()
}

// Trigger is the region's hx-trigger: its kinds, then always, then Also.
func (r Live) Trigger() string {
	parts := make([]string, 0, len(r.Kinds)+len(always)+len(r.Also))
	for _, k := range r.Kinds {
		parts = append(parts, "sse:"+k)
	}
	parts = append(parts, always...)
	parts = append(parts, r.Also...)
	return strings.Join(parts, ", ")
}
