package ws

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/internal/triage"
)

// The protocol: JSON text messages, each an object with a "type".
//
// Client to server:
//
//	{"type": "hello", "view": "board" | "item" | "list", "items": [ids]}
//	    what the page shows; sent on every (re)connect and when a hidden
//	    tab becomes visible. The server answers with the current state of
//	    those items and who is in the view (a resync). "board" also
//	    subscribes to every item's changes and its visitor is on the
//	    board; "item" subscribes to its items only, and its visitor looks
//	    at the first item (the item's page, or the page of the failure it
//	    tracks); "list" (rows of items on another page) subscribes to its
//	    items and shows who looks at each, its visitor looking at none.
//	{"type": "mutate", "mutation_id", "item", "op", "args", "seen_version"}
//	    a triage.Input; answered by an "answer".
//	{"type": "heartbeat", "item": id}
//	    the holder's page is open: extend the claim (triage.Heartbeat);
//	    answered by a "heartbeat".
//
// Server to client:
//
//	{"type": "state", "items": [triage.Item]}   newest known states
//	{"type": "presence", "views": {view: [names]}}
//	{"type": "answer", "answer": triage.Answer}
//	{"type": "heartbeat", "item": id, "ok": bool, "expires_at"}
//	{"type": "resync"}   read everything again (send hello)
//	{"type": "error", "message"}   a malformed message; nothing happened

// clientMessage is any message from a client.
type clientMessage struct {
	Type  string  `json:"type"`
	View  string  `json:"view"`
	Items []int64 `json:"items"`
	Item  int64   `json:"item"`
	// A "mutate" is decoded again as a triage.Input.
}

// maxHelloItems bounds the items one page may subscribe to.
const maxHelloItems = 500

type stateMessage struct {
	Type  string         `json:"type"`
	Items []*triage.Item `json:"items"`
}

type presenceMessage struct {
	Type  string              `json:"type"`
	Views map[string][]string `json:"views"`
}

type answerMessage struct {
	Type   string        `json:"type"`
	Answer triage.Answer `json:"answer"`
}

type heartbeatMessage struct {
	Type      string     `json:"type"`
	Item      int64      `json:"item"`
	OK        bool       `json:"ok"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

type noticeMessage struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

func encode(v any) []byte {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return b
}

func parseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}
