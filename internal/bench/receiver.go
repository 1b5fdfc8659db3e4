package bench

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// receiverBodyLimit is the largest request body the receiver reads.
const receiverBodyLimit = 2 << 20

// benchReceiver is the http bench's webhook receiver on 127.0.0.1: it
// verifies each request's signature, as a real receiver would, and answers
// 204. A request that fails verification gets 401 with the reason, and
// the bench stops at its first failed delivery, so a signing fault fails
// the bench instead of hiding in its figures.
//
// It parses each request with http.ReadRequest on a keep-alive connection
// and writes its answer as it is on the wire, instead of serving with
// net/http's server: the server's response writer and the read it starts
// in the background after every request (to notice a client that went
// away) cost CPU that, on this 2-core machine, the receiver would take
// from the dispatcher it measures. A real receiver runs elsewhere.
type benchReceiver struct {
	url    string
	ln     net.Listener
	keys   webhook.Keys
	logger *slog.Logger
	// verified counts the requests answered 204.
	verified atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection's loop
}

func startBenchReceiver(secret string, logger *slog.Logger) (*benchReceiver, error) {
	keys, err := webhook.NewKeys(secret)
	if err != nil {
		return nil, fmt.Errorf("start the webhook receiver: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the webhook receiver: %w", err)
	}
	r := &benchReceiver{
		url: "http://" + ln.Addr().String() + "/webhook", ln: ln, keys: keys, logger: logger,
		conns: make(map[net.Conn]struct{}),
	}
	r.wg.Add(1)
	go r.accept()
	logger.Info("webhook receiver listening", slog.String("url", r.url))
	return r, nil
}

func (r *benchReceiver) accept() {
	defer r.wg.Done()
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.logger.Error("webhook receiver stopped", slog.Any("error", err))
			}
			return
		}
		if !r.track(conn) {
			_ = conn.Close()
			return
		}
		go r.serve(conn)
	}
}

// track registers conn for close, or reports false once the receiver is
// closing.
func (r *benchReceiver) track(conn net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[conn] = struct{}{}
	r.wg.Add(1)
	return true
}

// serve answers one connection's requests in turn until the client closes
// it or sends what is not HTTP/1.1.
func (r *benchReceiver) serve(conn net.Conn) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, conn)
		r.mu.Unlock()
		_ = conn.Close()
	}()
	rd := bufio.NewReader(conn)
	var body bytes.Buffer
	for {
		req, err := http.ReadRequest(rd)
		if err != nil {
			return // the client closed the connection, or the receiver did
		}
		status, text := r.answer(req, &body)
		if _, err := conn.Write(response(status, text, req.Close)); err != nil || req.Close || status == http.StatusBadRequest {
			return
		}
	}
}

// answer reads req's body into body and checks its signature: 204, 401
// with the reason, or 400 for a body that cannot be read whole (and then
// the connection closes: what is left of the body is not read).
func (r *benchReceiver) answer(req *http.Request, body *bytes.Buffer) (int, string) {
	body.Reset()
	if req.ContentLength > receiverBodyLimit {
		return http.StatusBadRequest, "body too large"
	}
	if _, err := body.ReadFrom(io.LimitReader(req.Body, receiverBodyLimit+1)); err != nil {
		return http.StatusBadRequest, err.Error()
	}
	if body.Len() > receiverBodyLimit {
		return http.StatusBadRequest, "body too large"
	}
	if err := r.keys.Verify(req.Header, body.Bytes(), webhook.DefaultTolerance, time.Now()); err != nil {
		return http.StatusUnauthorized, err.Error()
	}
	r.verified.Add(1)
	return http.StatusNoContent, ""
}

// noContent is the answer to every verified request.
var noContent = []byte("HTTP/1.1 204 No Content\r\n\r\n")

// response is an HTTP/1.1 answer with status and, unless it is 204, text
// as a plain-text body; close asks the client to close the connection.
func response(status int, text string, close bool) []byte {
	if status == http.StatusNoContent && !close {
		return noContent
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	if close || status == http.StatusBadRequest {
		b.WriteString("Connection: close\r\n")
	}
	if status != http.StatusNoContent {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(text)) + "\r\n")
	}
	b.WriteString("\r\n")
	if status != http.StatusNoContent {
		b.WriteString(text)
	}
	return b.Bytes()
}

// close stops accepting, closes every connection and waits for their
// loops. The dispatcher has stopped by then: nothing is in flight.
func (r *benchReceiver) close() {
	r.mu.Lock()
	r.closed = true
	_ = r.ln.Close()
	for conn := range r.conns {
		_ = conn.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// newWebhookSecret returns a fresh Standard Webhooks secret, whsec_ and a
// base64 256-bit key.
func newWebhookSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate a webhook secret: %w", err)
	}
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}
