package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// run is one run's parts, once they are started.
type run struct {
	cfg    Config
	db     *database
	ps     *procs // the dispatchers
	serves *procs // the console instances
	urls   []string
	rec    *receiver
	dest   *proxy
	nats   *natsServer
}

// viewClientsPerInstance is how many SSE clients follow each instance.
const viewClientsPerInstance = 2

// traffic starts the live-view clients, then enqueues, writes feed
// changes, sends inbox events and injects faults for cfg.Seconds; then it
// heals, drains and checks.
func (r *run) traffic(ctx context.Context) (Summary, error) {
	pools, err := r.pools(ctx)
	if err != nil {
		return Summary{}, err
	}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	enqPool, writerPool, viewerPool := pools[0], pools[1], pools[2]
	clientCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	clients, err := r.startClients(clientCtx, viewerPool)
	if err != nil {
		return Summary{}, err
	}
	items, err := createTriageItems(ctx, r.db.admin)
	if err != nil {
		return Summary{}, err
	}
	sockets, err := r.startSockets(clientCtx, items)
	if err != nil {
		return Summary{}, err
	}
	enq := newEnqueuer(enqPool, destinationName, jetstreamDestination, 20)
	writer := &feedWriter{pool: writerPool, acked: map[int64]time.Time{}}
	sender := newInboxSender(r.urls)
	in := &injector{db: r.db, procs: r.ps, dest: r.dest, receiver: r.rec, lease: lease, mix: r.cfg.Faults,
		logger: r.cfg.Logger, counts: map[string]int{}}
	writeCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	giveCtx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	writerDone := make(chan struct{}, 2)
	go func() { writer.run(writeCtx, r.cfg.Seed, 100*time.Millisecond); writerDone <- struct{}{} }()
	go func() {
		triageWriter(writeCtx, writerPool, items, r.cfg.Seed, 300*time.Millisecond)
		writerDone <- struct{}{}
	}()
	runCtx, stop := context.WithTimeout(ctx, time.Duration(r.cfg.Seconds)*time.Second)
	defer stop()
	done := make(chan struct{}, 3)
	go func() { enq.run(runCtx, r.cfg.Seed, time.Second/time.Duration(r.cfg.Rate)); done <- struct{}{} }()
	go func() { in.run(runCtx, r.cfg.Seed); done <- struct{}{} }()
	go func() { sender.run(runCtx, giveCtx, r.cfg.Seed, 250*time.Millisecond); done <- struct{}{} }()
	for range 3 {
		<-done
	}
	if ctx.Err() != nil {
		return Summary{}, ctx.Err()
	}
	healed := time.Now()
	pending, err := drain(ctx, r.db)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Seed: r.cfg.Seed, Seconds: r.cfg.Seconds, Faults: in.faults(), DrainSeconds: time.Since(healed).Seconds(), PendingLeft: pending}
	waitInbox(sender, time.Minute)
	giveUp()
	sender.wg.Wait()
	stopWriter()
	<-writerDone
	<-writerDone
	if s.Views, err = checkViews(ctx, r.db.admin, clients, writer.acknowledged(), healed); err != nil {
		return s, err
	}
	if s.Sockets, err = checkSockets(ctx, r.db.admin, sockets, items); err != nil {
		return s, err
	}
	stopClients()
	r.ps.stopAll(10 * time.Second)
	r.serves.stopAll(10 * time.Second)
	s.ProcessStarts, s.ProcessExits = r.ps.counts()
	s.ServeStarts, s.ServeExits = r.serves.counts()
	if s.Inbox, err = sender.check(ctx, r.db.admin); err != nil {
		return s, err
	}
	return r.judge(ctx, s, enq)
}

// pools opens the enqueuer's, the feed writer's and the viewers' pools,
// all through the proxy, like the console processes.
func (r *run) pools(ctx context.Context) ([]*pgxpool.Pool, error) {
	var out []*pgxpool.Pool
	for _, app := range []string{enqueuerApp, feedWriterApp, viewerApp} {
		p, err := connect(ctx, r.db.processURL(), app)
		if err != nil {
			for _, q := range out {
				q.Close()
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// startClients starts viewClientsPerInstance SSE clients on each instance
// and waits until each has its first "ready".
func (r *run) startClients(ctx context.Context, reload *pgxpool.Pool) ([]*viewClient, error) {
	var clients []*viewClient
	for _, u := range r.urls {
		for range viewClientsPerInstance {
			c := newViewClient(u, reload)
			clients = append(clients, c)
			go c.run(ctx)
		}
	}
	timeout := time.After(time.Minute)
	for _, c := range clients {
		select {
		case <-c.ready:
		case <-timeout:
			return nil, fmt.Errorf("live-view client of %s: no ready event within a minute", c.url)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return clients, nil
}

// startSockets starts viewClientsPerInstance WebSocket clients of the
// triage board on each instance and waits until each has its first state.
func (r *run) startSockets(ctx context.Context, items []int64) ([]*wsClient, error) {
	var clients []*wsClient
	for _, u := range r.urls {
		for range viewClientsPerInstance {
			c := newWSClient(u, items)
			clients = append(clients, c)
			go c.run(ctx)
		}
	}
	timeout := time.After(time.Minute)
	for _, c := range clients {
		select {
		case <-c.ready:
		case <-timeout:
			return nil, fmt.Errorf("WebSocket client of %s: no state within a minute", c.url)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return clients, nil
}

// waitInbox waits until every send of the inbox sender has ended, at most
// timeout.
func waitInbox(s *inboxSender, timeout time.Duration) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// judge runs the checker for each destination and completes the summary
// with its verdict.
func (r *run) judge(ctx context.Context, s Summary, enq *enqueuer) (Summary, error) {
	js, err := r.nats.deliveries(ctx)
	if err != nil {
		return s, err
	}
	seen := map[string][]delivery{destinationName: r.rec.deliveries(), jetstreamDestination: js}
	s.Destinations = map[string]verdict{}
	for _, d := range destinations {
		sure, _ := enq.acknowledged(d)
		v, err := check(ctx, r.db.admin, d, seen[d], sure)
		if err != nil {
			return s, err
		}
		s.Destinations[d] = v
		s.verdict = s.verdict.plus(v)
		for _, f := range v.failures() {
			s.Failures = append(s.Failures, d+": "+f)
		}
	}
	s.Failures = append(s.Failures, s.Inbox.failures()...)
	if s.Inbox.Unanswered > 0 {
		s.Failures = append(s.Failures, fmt.Sprintf("inbox_unanswered=%d", s.Inbox.Unanswered))
	}
	if s.Views.Mismatched > 0 {
		s.Failures = append(s.Failures, fmt.Sprintf("views_mismatched=%d", s.Views.Mismatched))
	}
	if s.Sockets.Mismatched > 0 {
		s.Failures = append(s.Failures, fmt.Sprintf("sockets_mismatched=%d", s.Sockets.Mismatched))
	}
	if s.Views.Late > 0 {
		s.Failures = append(s.Failures, fmt.Sprintf("views_late=%d", s.Views.Late))
	}
	if s.PendingLeft > 0 {
		s.Failures = append(s.Failures, fmt.Sprintf("pending_left=%d", s.PendingLeft))
	}
	s.Passed = len(s.Failures) == 0
	return s, nil
}
