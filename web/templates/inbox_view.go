package templates

// InboxList is the inbox page: events newest first, filtered, one page of
// a keyset pagination.
type InboxList struct {
	Source string // the source filter; "": all
	Status string // the status filter; "": all
	// Sources and Statuses are the filter's choices.
	Sources  []string
	Statuses []string
	Events   []InboxEventRow
	// Duplicates is shown instead of Events when Status is "duplicates":
	// duplicates are counted per source, not stored per delivery.
	Duplicates []InboxDuplicateRow
	// NextHref is the next page's URL; "": this is the last page.
	NextHref string
	// FirstHref goes back to the newest events with the same filters;
	// "" on the first page.
	FirstHref string
}

// ShowsDuplicates reports whether the page lists duplicate counters.
func (l InboxList) ShowsDuplicates() bool { return l.Status == "duplicates" }

// InboxEventRow is one inbound event in the list.
type InboxEventRow struct {
	Href       string
	Source     string
	EventID    string
	ReceivedAt string
	Entity     string
	Status     string
	Tone       string
	Attempts   string
	Error      string
}

// InboxDuplicateRow is the duplicate count of one source.
type InboxDuplicateRow struct {
	Source     string
	Duplicates string
	LastAt     string
}

// InboxEvent is the detail page of one inbound event. Payload and headers
// are shown as escaped text only.
type InboxEvent struct {
	ID          string
	Source      string
	SourceHref  string
	EventID     string
	ReceivedAt  string
	ProcessedAt string
	Entity      string
	Status      string
	Tone        string
	Attempts    string
	Error       string
	Fingerprint string
	Signature   string
	Headers     []KeyValue
	Payload     string
	// Triage is the item of its group of parked events; nil if none.
	Triage *TriageItemView
}

// KeyValue is one header or field.
type KeyValue struct {
	Key, Value string
}
