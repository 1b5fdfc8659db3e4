package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
	"github.com/switchyard/switchyard/web/static"
)

// instance is one console instance on the shared database, serving HTTP
// with its own triage socket server (demo mode: a loopback client is the
// demo admin).
func instance(t *testing.T, pool *pgxpool.Pool) *httptest.Server {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	assets, err := static.New()
	require.NoError(t, err)
	engine := &triage.Engine{Pool: pool}
	socket := ws.New(ws.Config{Engine: engine, Presence: &triage.Presence{Pool: pool}})
	require.NoError(t, socket.Start(context.Background()))
	registry := prometheus.NewRegistry()
	h := console.New(console.Deps{
		Logger: logger, Assets: assets, Gatherer: registry, DB: pool, Demo: true,
		Auth: testAuth(pool, auth.Config{}), AuditLog: audit.Log{DB: pool},
		Triage: engine, TriageSocket: socket,
	})
	e, err := httpserver.New(httpserver.Config{Logger: logger, Registerer: registry, RenderError: h.RenderError})
	require.NoError(t, err)
	h.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	t.Cleanup(socket.Stop)
	return srv
}

// 100 copies of one mutation (one mutation id) at once over 3 console
// instances, half over the WebSocket and half over the HTTP fallback:
// one effect, one event row, one audit row, 100 identical answers.
func TestTriageIdenticalMutationsOverThreeInstancesAndBothTransports(t *testing.T) {
	t.Parallel()
	_, pool, id := triageSetup(t)
	instances := []*httptest.Server{instance(t, pool), instance(t, pool), instance(t, pool)}
	in := triage.Input{MutationID: uuid.New(), ItemID: id, Op: triage.OpStatus, Args: triage.Args{Status: triage.Investigating}, SeenVersion: 1}

	const copies = 100
	answers := make([]triage.Answer, copies)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range copies {
		srv := instances[i%len(instances)]
		send := overHTTP
		if i%2 == 0 {
			send = overSocket
		}
		wg.Go(func() {
			a, err := send(srv.URL, in, start)
			if err != nil {
				t.Errorf("copy %d: %v", i, err)
			}
			answers[i] = a
		})
	}
	close(start)
	wg.Wait()

	require.True(t, answers[0].OK, answers[0].Message)
	want, err := json.Marshal(answers[0])
	require.NoError(t, err)
	for i, a := range answers {
		got, err := json.Marshal(a)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got), "copy %d", i)
	}
	var events, audits int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.triage_events WHERE op = 'status'").Scan(&events))
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.audit_log WHERE action = 'triage.status'").Scan(&audits))
	require.Equal(t, 1, events)
	require.Equal(t, 1, audits)
}

func overHTTP(base string, in triage.Input, start <-chan struct{}) (triage.Answer, error) {
	body, _ := json.Marshal(in)
	req, err := http.NewRequest(http.MethodPost, base+"/triage/mutations", strings.NewReader(string(body)))
	if err != nil {
		return triage.Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.MutationID.String())
	<-start
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return triage.Answer{}, err
	}
	defer resp.Body.Close()
	var a triage.Answer
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

func overSocket(base string, in triage.Input, start <-chan struct{}) (triage.Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		return triage.Answer{}, err
	}
	defer c.CloseNow()
	msg, _ := json.Marshal(map[string]any{"type": "mutate", "mutation_id": in.MutationID, "item": in.ItemID,
		"op": in.Op, "args": in.Args, "seen_version": in.SeenVersion})
	<-start
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		return triage.Answer{}, err
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return triage.Answer{}, err
		}
		var m struct {
			Type   string        `json:"type"`
			Answer triage.Answer `json:"answer"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return triage.Answer{}, err
		}
		if m.Type == "answer" {
			return m.Answer, nil
		}
	}
}
