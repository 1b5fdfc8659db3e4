package chaos

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// delivery is one attempt the receiver saw.
type delivery struct {
	Key      string // webhook-id: the idempotency key
	ID       string // the message's own id, from its payload
	Order    int64  // the order the receiver answered in
	Accepted bool
}

// receiver is the destination: it records every delivery attempt and fails
// failRatio of them with a 500 after a random latency.
type receiver struct {
	srv       *http.Server
	ln        net.Listener
	failRatio float64
	maxDelay  time.Duration

	mu   sync.Mutex
	rnd  *rand.Rand
	seen []delivery
}

func newReceiver(seed uint64, failRatio float64, maxDelay time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ln: ln, failRatio: failRatio, maxDelay: maxDelay, rnd: rand.New(rand.NewPCG(seed, 2))}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) Addr() string { return r.ln.Addr().String() }

func (r *receiver) Close() { _ = r.srv.Close() }

func (r *receiver) draw() (fail bool, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rnd.Float64() < r.failRatio, time.Duration(r.rnd.Int64N(int64(r.maxDelay) + 1))
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var p struct {
		ID string `json:"id"`
	}
	if err != nil || json.Unmarshal(body, &p) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	fail, delay := r.draw()
	time.Sleep(delay) // the destination's own latency, not a wait for a signal
	r.mu.Lock()
	r.seen = append(r.seen, delivery{Key: req.Header.Get("webhook-id"), ID: p.ID, Order: int64(len(r.seen)), Accepted: !fail})
	r.mu.Unlock()
	if fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deliveries returns a copy of what the receiver saw.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.seen...)
}

// setFailRatio changes the share of attempts answered with a 500.
func (r *receiver) setFailRatio(f float64) {
	r.mu.Lock()
	r.failRatio = f
	r.mu.Unlock()
}
