package templates

// SecretRef is one environment variable a destination or source names for
// a secret: the page shows whether it resolves, never its value.
type SecretRef struct {
	Name     string
	Resolves bool
}

// DestinationSetting is one row of switchyard.destinations as the
// configuration page shows it.
type DestinationSetting struct {
	Name, Kind, Address string
	Secrets             []SecretRef
	// Permanent is the delivery policy in words: the statuses that
	// dead-letter at once.
	Permanent                         string
	Concurrency, Rate, Retry, Breaker string
	// Problem is what is wrong with the row, "" when nothing is.
	Problem string
	// Disabled: its messages wait; EditURL edits it.
	Disabled bool
	EditURL  string
}

// SourceSetting is one row of switchyard.inbox_sources as the
// configuration page shows it.
type SourceSetting struct {
	Name, Scheme, Handler string
	// HandlerDetail says what a built-in handler does ("forward to crm,
	// ordered by data.id"); "" for a Go handler.
	HandlerDetail         string
	Secrets               []SecretRef
	Tolerance, OutOfOrder string
	MaxAttempts           string
	Problem               string
	Disabled              bool
	EditURL               string
}

// SettingsLists are the configuration page's live region: both lists.
// Notice reports a delete that led here ("" none); it is shown above the
// live region, not in it.
type SettingsLists struct {
	Notice  string
	Dests   []DestinationSetting
	Sources []SourceSetting
}

// FormState is a configuration form as the admin typed it: every field's
// text by its name, and, after a refusal, the field at fault and why.
type FormState struct {
	Values map[string]string
	// Checked are the checkboxes and radio buttons that are on.
	Checked map[string]bool
	// ErrField is the field at fault ("" for an error of no one field);
	// Err says why. Notice reports a save.
	ErrField, Err, Notice string
}

// Value is field's text.
func (f FormState) Value(name string) string { return f.Values[name] }

// FieldError is field's error, "" when the refusal concerns another.
func (f FormState) FieldError(name string) string {
	if f.ErrField == name {
		return f.Err
	}
	return ""
}

// DestinationForm is the page that creates or edits a destination.
type DestinationForm struct {
	Create bool
	// Action is where the form posts.
	Action string
	Form   FormState
	// Secrets say which references resolve in this console's
	// environment (edit only, of the saved row).
	Secrets []SecretRef
	// Check is the last check of a JetStream destination's stream,
	// CheckedAt when it ran; "" when it passed or there was none.
	Check, CheckedAt string
	// Problem is what the dispatcher would find wrong with the saved
	// row ("" when nothing).
	Problem string
	// TestURL posts a test message (edit only).
	TestURL string
	// Remove is the rename and delete panel (edit only).
	Remove RemoveForm
}

// SourceForm is the page that creates or edits an inbox source.
type SourceForm struct {
	Create  bool
	Action  string
	Form    FormState
	Secrets []SecretRef
	Problem string
	// Handlers are the handlers a source may name: the built-in forward
	// and sql, then the console's Go handlers.
	Handlers []string
	// Destinations name the destinations a forward source may use.
	Destinations []string
	TestURL      string
	// ReceiveURL is where the source's senders post.
	ReceiveURL string
	// Remove is the rename and delete panel (edit only).
	Remove RemoveForm
}

// RemoveForm is the panel that renames or deletes a destination or a
// source, with what each does to what names it.
type RemoveForm struct {
	// What is "destination" or "inbox source"; Name the current name.
	What, Name string
	// RenameURL and DeleteURL are where the panel's two forms post; ""
	// hides the panel.
	RenameURL, DeleteURL string
	// Rename and Delete say what each does and when it is refused.
	Rename, Delete string
	// NewName is the new name as typed; Err why a rename or delete was
	// refused, ErrField the field at fault ("new_name", "confirm", or "").
	NewName, Err, ErrField string
}

// DestinationTestResult is a destination's test message as it goes: its
// state, attempts and last error, followed live until it settles.
type DestinationTestResult struct {
	ID        int64
	MessageID string
	State     string
	Attempts  int
	LastError string
	// Done: delivered or dead.
	Done bool
	// LiveURL re-reads the result.
	LiveURL string
	// Error is a refusal of the test ("" when it was sent).
	Error string
}

// SourceTestResult is what became of a source's test event.
type SourceTestResult struct {
	EventID, Outcome, Error string
	// Tone is the outcome's badge class: ok, warn or bad.
	Tone string
	// EventsURL lists the source's events.
	EventsURL string
}
