package templates

import "fmt"

// MessageActions is one message's actions panel: what it is, what state
// it is in, and the actions the viewer may take on it.
type MessageActions struct {
	ID            int64
	Topic         string
	Destination   string
	Aggregate     string // "type/id", or "" when unordered
	State         string
	Attempts      int32
	LastError     string
	Payload       string // pretty-printed, or the redaction notice
	ReplayOf      int64  // 0: an original
	Replays       int32
	Generation    int32
	ReplayPending bool
	LastReplayID  int64
	// LastReplayState is the newest replay's state ("" if none): a
	// replayed message shows what became of it.
	LastReplayState string
	// Blocking: it is the dead head its aggregate waits behind; a replay
	// or a discard unblocks the aggregate.
	Blocking bool
	// Headers and the newest delivery attempts (newest first), shown
	// beside the buttons so the operator decides without another page.
	Headers      []Header
	LastAttempts []Attempt

	// CanOperate: replay, re-apply, discard, restore. CanEdit: edit and
	// replay (admin).
	CanOperate bool
	CanEdit    bool
	// Request ids, one per form, generated when the panel renders: a
	// double click or a retry of one form sends the same one.
	// (Edit and replay gets its own with the diff it confirms.)
	ReplayRequestID, DiscardRequestID string
	// ReplayMode and ReplayReason refill the replay form after a refusal.
	ReplayMode, ReplayReason string
	// Notice reports what the last action did; Error why it was refused.
	Notice string
	Error  string
}

// Version names what the panel and the facts beside it show of the
// message (not the request ids): a live re-fetch that sends the version
// its page shows is answered 204 when nothing changed, so that a form
// being filled in is not reset by a change that did not touch it.
func (m MessageActions) Version() string {
	return fmt.Sprintf("%s.%d.%d.%d.%d.%s.%t.%t", m.State, m.Attempts, m.Replays, m.Generation, m.LastReplayID, m.LastReplayState, m.ReplayPending, m.Blocking)
}

// Dead reports whether the message can be replayed or discarded now.
func (m MessageActions) Dead() bool { return m.State == "dead" && !m.ReplayPending }

// EditPreview is the confirmation step of edit and replay: the diff of
// the edited payload against the original, before anything is created.
type EditPreview struct {
	ID        int64
	RequestID string
	Payload   string // the edited payload, as submitted (valid JSON)
	Reason    string
	Mode      string
	Diff      []DiffLine
	Changed   bool
}

// DiffLine is one line of a line diff: Op is "+", "-" or " ".
type DiffLine struct {
	Op   string
	Text string
}

// ReplayJob is one bulk replay job as the Replays page shows it.
type ReplayJob struct {
	ID       string
	State    string
	Mode     string
	Actor    string
	Reason   string
	Filter   string
	Rate     int32
	Estimate int64
	Replayed int64
	Skipped  int64
	// What became of the job's replays so far: delivered, dead again
	// (each is a dead letter of its own), or still pending.
	Delivered, DeadAgain, Pending int64
	Created                       string
	CanCancel                     bool
	// RequestID of the cancel button.
	RequestID string
}

// Done is how many messages the job went through so far.
func (j ReplayJob) Done() int64 { return j.Replayed + j.Skipped }

// BulkForm is the new bulk replay form, and its confirmation once
// estimated.
type BulkForm struct {
	Fingerprint   string
	Destination   string
	Topic         string
	AggregateType string
	AggregateID   string
	ErrorContains string
	// CreatedFrom and CreatedTo bound when the messages were enqueued
	// (datetime-local, UTC), as the message list's from and to do.
	CreatedFrom string
	CreatedTo   string
	// BlockedHeads keeps to the dead heads of blocked aggregates.
	BlockedHeads bool
	// All confirms an empty filter: every dead message.
	All    bool
	Mode   string
	Reason string
	Rate   int
	// Estimated: the confirm step; Estimate is the count, AtLeast when
	// counting stopped at the cap, About when it is the planner's
	// estimate of a filter that matches more than the cap.
	Estimated bool
	Estimate  int64
	AtLeast   bool
	About     bool
	RequestID string
	Error     string
}

// ReplaysView is the Replays page: the new job form and the newest jobs.
type ReplaysView struct {
	CanOperate bool
	Form       BulkForm
	Jobs       []ReplayJob
}
