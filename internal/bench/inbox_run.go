package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/pgwarm"
)

// inboxMeasurement is what the measured phase saw.
type inboxMeasurement struct {
	elapsed time.Duration
	latency durations
	cpu     benchCPU // per 1,000 requests
	// self and cluster are the CPU time this process and the whole
	// server (clusterSample) used in the measured phase, for the side by
	// side with the floor.
	self, cluster time.Duration
}

// measure sends every prepared request from --concurrency senders and
// times it; any answer but 200 fails the run: only clean runs count.
func (r *inboxBenchRun) measure(ctx context.Context) (inboxMeasurement, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	latencies := make([]time.Duration, len(r.requests))
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) {
		once.Do(func() { firstErr = err; cancel() })
	}
	// The receiver's connections are opened before the clock starts, so
	// that the measured phase neither waits for nor pays the server's
	// process starts, and the CPU sample at its start lists them.
	if err := pgwarm.Open(ctx, r.target.pool, r.opts.concurrency); err != nil {
		return inboxMeasurement{}, fmt.Errorf("open the receiver's connections: %w", err)
	}
	stopProfile, err := startCPUProfile(r.opts.cpuProfile)
	if err != nil {
		return inboxMeasurement{}, err
	}
	defer stopProfile()
	clusterStart, err := sampleClusterCPU(ctx, r.target.pool)
	if err != nil {
		return inboxMeasurement{}, err
	}
	cpuStart, err := sampleCPU(ctx, r.target.pool)
	if err != nil {
		return inboxMeasurement{}, err
	}
	var wg sync.WaitGroup
	start := time.Now()
	for range r.opts.concurrency {
		wg.Go(func() {
			s, err := r.dial(ctx)
			if err != nil {
				fail(err)
				return
			}
			defer s.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(r.requests) || ctx.Err() != nil {
					return
				}
				began := time.Now()
				if err := s.send(r.requests[i]); err != nil {
					fail(err)
					return
				}
				latencies[i] = time.Since(began)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return inboxMeasurement{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return inboxMeasurement{}, fmt.Errorf("measured phase: %w", err)
	}
	cpuEnd, err := sampleCPU(ctx, r.target.pool)
	if err != nil {
		return inboxMeasurement{}, err
	}
	clusterEnd, err := sampleClusterCPU(ctx, r.target.pool)
	if err != nil {
		return inboxMeasurement{}, err
	}
	if err := stopProfile(); err != nil {
		return inboxMeasurement{}, err
	}
	slices.Sort(latencies)
	return inboxMeasurement{
		elapsed: elapsed, latency: latencies, cpu: cpuSince(cpuStart, cpuEnd, len(r.requests)),
		self: cpuEnd.self - cpuStart.self, cluster: clusterEnd.since(clusterStart),
	}, nil
}

// sender is one sender's keep-alive connection to the receiver. It writes
// each prepared request as it is on the wire and parses the answer with
// http.ReadResponse. net/http's client would cost two goroutines and their
// hand-offs per request: CPU that, on this 2-core machine, the load
// generator would take from the receiver it measures.
type sender struct {
	conn net.Conn
	rd   *bufio.Reader
}

// dial opens a sender whose reads and writes give up when ctx ends, so that
// one failed sender stops the others.
func (r *inboxBenchRun) dial(ctx context.Context) (*sender, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, fmt.Errorf("connect to the receiver: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	return &sender{conn: &stoppableConn{Conn: conn, stop: stop}, rd: bufio.NewReader(conn)}, nil
}

type stoppableConn struct {
	net.Conn
	stop func() bool
}

func (c *stoppableConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

func (s *sender) close() { _ = s.conn.Close() }

func (s *sender) send(req benchRequest) error {
	if _, err := s.conn.Write(req.wire); err != nil {
		return fmt.Errorf("send event %s: %w", req.id, err)
	}
	resp, err := http.ReadResponse(s.rd, nil)
	if err != nil {
		return fmt.Errorf("read the answer to event %s: %w", req.id, err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read the answer to event %s: %w", req.id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("event %s: status %d: %s", req.id, resp.StatusCode, bytes.TrimSpace(body))
	}
	if resp.Close {
		return fmt.Errorf("event %s: the receiver closed the connection", req.id)
	}
	return nil
}

// check confirms the effect: every unique event recorded and applied
// once, every redelivery counted as a duplicate.
func (r *inboxBenchRun) check(ctx context.Context) error {
	if r.opts.handler == inbox.HandlerForward {
		return r.checkForward(ctx)
	}
	source := r.source
	var events, customers, duplicates int
	err := r.target.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM switchyard.inbox_events WHERE source = $1 AND status = 'processed'),
		(SELECT count(*) FROM switchyard_demo.customers WHERE external_id LIKE $1 || '-%'),
		(SELECT coalesce(sum(count), 0) FROM switchyard.inbox_duplicates WHERE source = $1)`, source).
		Scan(&events, &customers, &duplicates)
	if err != nil {
		return fmt.Errorf("check the inbox: %w", err)
	}
	if events != r.unique || customers != r.unique || duplicates != r.duplicates {
		return fmt.Errorf("check the inbox: %d events processed, %d customers, %d duplicates counted; want %d, %d, %d",
			events, customers, duplicates, r.unique, r.unique, r.duplicates)
	}
	return nil
}

// installDemo installs the demo's schema (internal/demo/demodb), where the
// customer-upsert handler writes. In place, cleanup removes the bench's
// rows, and the schema too unless it was there before; in a database of
// its own there is nothing to clean.
func installDemo(ctx context.Context, t *benchTarget, logger *slog.Logger) (cleanup func(), err error) {
	installed, err := demodb.Installed(ctx, t.pool)
	if err != nil {
		return nil, err
	}
	if err := demodb.Install(ctx, t.pool); err != nil {
		return nil, err
	}
	if t.created {
		return func() {}, nil
	}
	return func() { deleteInboxBenchRows(ctx, t, !installed, logger) }, nil
}

// deleteInboxBenchRows removes, in place, what an inbox bench wrote (under
// its source, and the sources of a side by side, which start with it and
// a dash); with dropDemo, the demo schema it installed too.
func deleteInboxBenchRows(ctx context.Context, t *benchTarget, dropDemo bool, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
	defer cancel()
	source := t.inboxSource() // letters, digits and dashes: nothing LIKE would read as a pattern
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			`DELETE FROM switchyard.inbox_events WHERE source = $1 OR source LIKE $1 || '-%'`,
			`DELETE FROM switchyard.inbox_duplicates WHERE source = $1 OR source LIKE $1 || '-%'`,
			`DELETE FROM switchyard.inbox_event_duplicates WHERE source = $1 OR source LIKE $1 || '-%'`,
			`DELETE FROM switchyard.inbox_entity_versions WHERE source = $1 OR source LIKE $1 || '-%'`,
			`DELETE FROM switchyard_demo.customers WHERE external_id LIKE $1 || '-%'`,
		} {
			if _, err := tx.Exec(ctx, stmt, source); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return nil
	})
	if err != nil {
		logger.Error("remove the inbox bench's rows", slog.String("source", source), slog.Any("error", err))
		return
	}
	if dropDemo {
		if err := demodb.Uninstall(ctx, t.pool); err != nil {
			logger.Error("remove the demo schema the inbox bench installed", slog.Any("error", err))
		}
	}
}
