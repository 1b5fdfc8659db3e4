package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// benchReceiver is the http bench's webhook receiver on 127.0.0.1: it
// verifies each request's signature, as a real receiver would, and answers
// 204. A request that fails verification gets 401, which the dispatcher
// treats as permanent, so a signing fault fails the bench instead of
// hiding in its figures.
type benchReceiver struct {
	url    string
	server *http.Server
	done   chan struct{} // closed when Serve has returned
}

func startBenchReceiver(secret string, logger *slog.Logger) (*benchReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the webhook receiver: %w", err)
	}
	r := &benchReceiver{url: "http://" + ln.Addr().String() + "/webhook", done: make(chan struct{})}
	r.server = &http.Server{
		Handler:           benchReceiverHandler(secret),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(r.done)
		if err := r.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("webhook receiver stopped", slog.Any("error", err))
		}
	}()
	logger.Info("webhook receiver listening", slog.String("url", r.url))
	return r, nil
}

func benchReceiverHandler(secret string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 2<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, req.Header, body, webhook.DefaultTolerance, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// close stops the receiver, letting requests in flight finish for a while.
func (r *benchReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.server.Shutdown(ctx); err != nil {
		_ = r.server.Close()
	}
	<-r.done
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
