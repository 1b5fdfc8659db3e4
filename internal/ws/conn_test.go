package ws

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/internal/triage"
)

// The socket's timers, run from its writer: pings close the socket of a
// client that stopped answering them and keep the one that answers.
func TestPingsCloseAClientThatStoppedAnswering(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{PingInterval: 50 * time.Millisecond, WriteTimeout: time.Second})
	var silentPings, answeredPings atomic.Int64
	silent := e.dialPinged(t, e.signIn(t, "silent", auth.Operator), &silentPings, false)
	answering := e.dialPinged(t, e.signIn(t, "answering", auth.Operator), &answeredPings, true)
	// CloseRead reads (and so answers pings) until a data message, of
	// which the server sends none before a hello.
	silentClosed := silent.CloseRead(context.Background()).Done()
	answeringClosed := answering.CloseRead(context.Background()).Done()
	testwait.For(t, 10*time.Second, "the silent client's socket closed", silentClosed)
	require.Positive(t, silentPings.Load())
	after := answeredPings.Load()
	testwait.Until(t, 10*time.Second, "five more pings answered", func() bool { return answeredPings.Load() >= after+5 })
	select {
	case <-answeringClosed:
		t.Fatal("the answering client's socket closed")
	default:
	}
	testwait.Until(t, 5*time.Second, "the silent socket gone", func() bool { return e.srv.Clients() == 1 })
}

// dialPinged dials as s, counting the pings the client receives in
// pings and answering them if answer.
func (e *env) dialPinged(t *testing.T, s auth.Session, pings *atomic.Int64, answer bool) *websocket.Conn {
	t.Helper()
	c, _, err := e.dialWith(s, e.http.URL, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
		pings.Add(1)
		return answer
	}})
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// The session is checked again every RecheckInterval: one ended where no
// change feed announces it (here: by hand in the database) closes its
// socket with StatusSessionEnded.
func TestRecheckClosesASocketWhoseSessionEnded(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{RecheckInterval: 50 * time.Millisecond})
	s := e.signIn(t, "alice", auth.Operator)
	c := e.dial(t, s)
	c.send(map[string]any{"type": "hello", "view": "board", "items": []int64{}})
	c.await(5*time.Second, "presence", func(m message) bool { return m.Type == "presence" })
	_, err := e.pool.Exec(context.Background(), "UPDATE switchyard.sessions SET revoked_at = now() WHERE id = $1", s.Principal.SessionID)
	require.NoError(t, err)
	require.Equal(t, StatusSessionEnded, c.closeStatus(10*time.Second))
}

// A socket refreshes its presence every PresenceRefresh, so that it
// outlives the presence's TTL.
func TestPresenceIsRefreshed(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{PresenceRefresh: 50 * time.Millisecond})
	c := e.dial(t, e.signIn(t, "alice", auth.Operator))
	c.send(map[string]any{"type": "hello", "view": "board", "items": []int64{}})
	c.await(5*time.Second, "presence", func(m message) bool { return m.Type == "presence" })
	expires := func() time.Time {
		var at time.Time
		require.NoError(t, e.pool.QueryRow(context.Background(),
			"SELECT expires_at FROM switchyard.triage_presence WHERE account_name = 'alice' AND view = $1", triage.BoardView).Scan(&at))
		return at
	}
	joined := expires()
	testwait.Until(t, 10*time.Second, "the presence refreshed", func() bool { return expires().After(joined) })
}

// A client may send its first message right behind the upgrade request,
// before the answer: the bytes the HTTP server read past the request are
// the socket's first, also with the socket's own (small) buffers.
func TestMessageSentWithTheUpgradeIsRead(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	s := e.signIn(t, "alice", auth.Operator)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.http.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	upgrade := "GET /ws HTTP/1.1\r\nHost: " + strings.TrimPrefix(e.http.URL, "http://") + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: " + e.http.URL + "\r\n" +
		"Cookie: session=" + s.Token + "\r\n\r\n"
	hello := maskedTextFrame([]byte(`{"type": "hello", "view": "board", "items": []}`))
	_, err = conn.Write(append([]byte(upgrade), hello...)) // one write: the server reads both at once
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	for {
		payload := readServerFrame(t, r)
		var m message
		require.NoError(t, json.Unmarshal(payload, &m))
		if m.Type == "presence" {
			require.Equal(t, []string{"alice"}, m.Views[triage.BoardView])
			return
		}
	}
}

// maskedTextFrame is payload (under 126 bytes) as a client's final text
// frame, masked as a client must.
func maskedTextFrame(payload []byte) []byte {
	key := [4]byte{1, 2, 3, 4}
	frame := append([]byte{0x81, 0x80 | byte(len(payload))}, key[:]...)
	for i, b := range payload {
		frame = append(frame, b^key[i%4])
	}
	return frame
}

// readServerFrame reads one unmasked, unfragmented data frame from the
// server and returns its payload.
func readServerFrame(t *testing.T, r *bufio.Reader) []byte {
	t.Helper()
	var head [2]byte
	_, err := io.ReadFull(r, head[:])
	require.NoError(t, err)
	require.Equal(t, byte(0x81), head[0], "a final text frame")
	n := int(head[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		_, err = io.ReadFull(r, ext[:])
		n = int(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		_, err = io.ReadFull(r, ext[:])
		n = int(binary.BigEndian.Uint64(ext[:]))
	}
	require.NoError(t, err)
	payload := make([]byte, n)
	_, err = io.ReadFull(r, payload)
	require.NoError(t, err)
	return payload
}
