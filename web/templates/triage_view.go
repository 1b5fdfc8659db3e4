package templates

// TriageItemView is one triage item as the board and its page show it.
// The data-* attributes it renders are what web/static/triage.js
// updates live.
type TriageItemView struct {
	ID           int64
	Href         string // the item's page
	KindLabel    string
	Title        string
	Status       string
	IgnoredUntil string
	Assignee     string // "" unassigned
	ClaimHolder  string // "" unclaimed (an expired claim is none)
	ClaimUntil   string
	Version      int64
	Updated      string
	// TrackedHref and TrackedLabel link the failure it tracks ("" when
	// that has no page).
	TrackedHref  string
	TrackedLabel string
}

// TriageColumn is one status's items on the board.
type TriageColumn struct {
	Status string
	Label  string
	Count  int64
	Items  []TriageItemView
}

// TriageBoardPage is the triage board.
type TriageBoardPage struct {
	Columns []TriageColumn
	// Filter as applied: Mine, Unassigned, Kind ("" all).
	Mine, Unassigned bool
	Kind             string
	Kinds            []TriageKindOption
	ItemIDs          string // comma-separated: the socket's hello
	Script           string // triage.js's URL
	ScriptIntegrity  string
	Style            string
	StyleIntegrity   string
}

// TriageKindOption is a choice of the kind filter.
type TriageKindOption struct {
	Value, Label string
}

// TriageItemPage is one item's page.
type TriageItemPage struct {
	Item TriageItemView
	// NextStatuses are the statuses a person may move it to.
	NextStatuses []string
	// CanMutate: the viewer's role may change it (operators, admins).
	CanMutate       bool
	Me              string // the viewer's account name (their claim's heartbeat)
	Replayable      bool
	Notes           []TriageNoteView
	History         []TriageEventView
	Script          string
	ScriptIntegrity string
	Style           string
	StyleIntegrity  string
}

// TriageNoteView is a note: plain text, rendered escaped.
type TriageNoteView struct {
	ID     int64
	Author string
	Body   string
	At     string
	Edited bool
}

// TriageEventView is one entry of an item's history.
type TriageEventView struct {
	Version int64
	At      string
	Actor   string
	Op      string
	Detail  string
}
