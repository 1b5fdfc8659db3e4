package templates

import (
	"encoding/json"
	"strconv"

	"github.com/a-h/templ"
)

// messageLiveAttrs are the attributes of a message page's hidden live
// region (messageLiveTrigger): it swaps nothing itself and takes regions
// from the answer by id.
func messageLiveAttrs(url, regions, include string) templ.Attributes {
	a := templ.Attributes{"hidden": true, "data-testid": "message-live", "hx-get": url, "hx-swap": "none", "hx-select-oob": regions}
	if include != "" {
		a["hx-include"] = include
	}
	return a
}

// actionsPageRegions are the parts of a message's actions page that follow
// the message.
const actionsPageRegions = "#message-facts,#message-recent,#actions-live"

// ActionAnsweredEvent is the event an action's answer raises once it has
// settled (HX-Trigger-After-Settle), on which the actions page refreshes.
const ActionAnsweredEvent = "message-action-answered"

func messageActionsURL(id int64) string {
	return "/messages/" + strconv.FormatInt(id, 10) + "/actions"
}

// idempotencyHeaders is an hx-headers value sending requestID as the
// Idempotency-Key.
func idempotencyHeaders(requestID string) string {
	b, _ := json.Marshal(map[string]string{"Idempotency-Key": requestID}) // a map of strings always marshals
	return string(b)
}

func discardPath(restore bool) string {
	if restore {
		return "/restore"
	}
	return "/discard"
}

func actionsStatus(m MessageActions) string {
	switch {
	case m.ReplayPending:
		return "A replay of this message is in flight: it cannot be replayed or discarded again until that replay is delivered or dead."
	case m.State == "dead" && !m.CanOperate:
		return "Dead."
	case m.State == "dead" && m.Replays > 0:
		return "Replayed " + strconv.FormatInt(int64(m.Replays), 10) + " time(s); the latest replay is " + m.LastReplayState + "."
	case m.State == "dead":
		return "Dead: it can be replayed or discarded."
	case m.State == "discarded":
		return "Discarded: it can be restored."
	case m.State == "delivered":
		return "Delivered: there is nothing to replay."
	}
	return "Still " + m.State + ": only a dead message can be replayed or discarded."
}

func diffClass(op string) string {
	switch op {
	case "+":
		return "diff-add"
	case "-":
		return "diff-del"
	}
	return "diff-same"
}

func diffTestID(op string) string {
	switch op {
	case "+":
		return "diff-added"
	case "-":
		return "diff-removed"
	}
	return "diff-same"
}

func jobClass(state string) string {
	switch state {
	case "done":
		return "ok"
	case "running":
		return "warn"
	}
	return ""
}

// requestIDVals is an hx-vals value sending requestID as request_id.
func requestIDVals(requestID string) string {
	b, _ := json.Marshal(map[string]string{"request_id": requestID}) // a map of strings always marshals
	return string(b)
}

// oobAttrs marks an element of an answer to be swapped out of band, by its
// id (hx-swap-oob="true"), when oob is set.
func oobAttrs(oob bool) templ.Attributes {
	if !oob {
		return nil
	}
	return templ.Attributes{"hx-swap-oob": "true"}
}
