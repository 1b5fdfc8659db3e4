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
	// LiveHref is the URL of the list's live region (the same filters
	// and page).
	LiveHref string
	// CanOperate shows each failed or parked event's Retry button.
	CanOperate bool
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
	// ID is the event's row id; RetryRequestID the request id of its
	// Retry button, set when the event can be retried by the viewer.
	ID             string
	RetryRequestID string
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
	// HeadersHidden: the reader may not see the event's headers (as its
	// payload: a viewer, unless the console allows it); Headers is then
	// empty and the page says why.
	HeadersHidden bool
	Payload       string
	// Triage is the item of its group of parked events; nil if none.
	Triage *TriageItemView
	// AttemptList is every attempt of the handler, oldest first.
	AttemptList []InboxAttempt
	// AttemptsNote says what AttemptList cannot show (attempts made
	// before they were recorded one by one, a settlement by the entity's
	// version), or, when it is empty, why; "" when there is nothing to
	// add.
	AttemptsNote string
	// Duplicates is how many deliveries of this event were duplicates;
	// DuplicateTimes the newest of them.
	Duplicates     string
	DuplicateTimes []string
	// Messages are the outbox messages the handler enqueued.
	Messages []InboxMessage
	// Handler says which handler the event's source runs ("" unknown).
	Handler string
	// CanRetry shows the Retry form (an operator, a failed or parked
	// event), with RetryRequestID as its request id.
	CanRetry       bool
	RetryRequestID string
	// CanOperate: the viewer has the operator role.
	CanOperate bool
}

// Retryable reports whether the event's status can be retried.
func (e InboxEvent) Retryable() bool { return e.Status == "failed" || e.Status == "parked" }

// ErrorLabel names the event's recorded handler error (errorLabel).
func (e InboxEvent) ErrorLabel() string { return errorLabel(e.Status) }

// ErrorLabel names the event's recorded handler error (errorLabel).
func (e InboxEventRow) ErrorLabel() string { return errorLabel(e.Status) }

// errorLabel names an inbox event's recorded handler error: the current
// one, or, once the event was processed (by a later attempt or a retry),
// an earlier one that no longer holds.
func errorLabel(status string) string {
	if status == "processed" {
		return "Earlier handler error"
	}
	return "Handler error"
}

// InboxAttempt is one attempt of an event's handler.
type InboxAttempt struct {
	N       string
	At      string
	Outcome string
	Tone    string
	Error   string
	// By is the operator who retried, or "delivery".
	By string
}

// InboxMessage is an outbox message an event's handler enqueued.
type InboxMessage struct {
	ID          int64
	Topic       string
	Destination string
	State       string
	CreatedAt   string
}

// KeyValue is one header or field.
type KeyValue struct {
	Key, Value string
}

// CausedNote says why the event's page lists no outbox message: whether
// its handler has run, and which handlers' messages are linked to their
// event (forward's, a sql function's rows inserted into the outbox, and a
// Go handler's enqueued with switchyard.Enqueue; not a Go handler's rows
// inserted with SQL).
func (e InboxEvent) CausedNote() string {
	switch {
	case e.Status == "stale":
		return "Nothing: a stale event's handler does not run."
	case e.Status == "held":
		return "Nothing yet: a held event's handler runs when its entity's previous version is applied."
	case e.Status != "processed":
		return "Nothing yet: the handler's effect, and any message it enqueues, commit only when it succeeds."
	case e.Handler == "forward":
		return "No message is linked to this event: it was forwarded before forwarded messages were linked here. " +
			"Its message carries the headers Switchyard-Inbox-Source and Switchyard-Inbox-Event-Id."
	case e.Handler == "sql":
		return "No outbox message is linked to this event: its sql function inserted none into switchyard.outbox " +
			"in the event's transaction, or ran before a sql function's messages were linked here."
	case e.Handler == "":
		return "No outbox message is linked to this event. Forward sources, sql functions and Go handlers that enqueue " +
			"with switchyard.Enqueue record the messages they cause; rows a Go handler inserts into the outbox with SQL are not linked."
	}
	return "No outbox message is linked to this event: its handler" + handlerName(e.Handler) +
		" enqueued none with switchyard.Enqueue in the event's transaction, or ran before such messages were linked. " +
		"Messages a handler inserts into the outbox with SQL are not linked."
}

// handlerName is " (name)" of a source's handler, or "".
func handlerName(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}
