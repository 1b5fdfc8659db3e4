package console

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// Lists with filters that no index serves (an error text, an aggregate
// alone) may read a whole search window per request (EXPLAIN.md): a
// session that sends them in a loop would hold the database. Each session
// gets a token bucket for them; an empty bucket is answered 429 with the
// Retry-After of its next token.
const (
	// ListRate is how many expensive list requests a session may send per
	// second, once its burst is spent.
	ListRate = rate.Limit(2)
	// ListBurst is how many it may send at once: a person paging through
	// results never meets the limit.
	ListBurst = 20
	// listThrottleSessions bounds the buckets kept; past it, the full
	// (idle) ones are dropped.
	listThrottleSessions = 10000
)

// listThrottle holds one token bucket per session.
type listThrottle struct {
	limit   rate.Limit
	burst   int
	mu      sync.Mutex
	buckets map[int64]*rate.Limiter // by session id; guarded by mu
}

// newListThrottle returns buckets of limit and burst; 0: the defaults.
func newListThrottle(limit rate.Limit, burst int) *listThrottle {
	if limit == 0 {
		limit = ListRate
	}
	if burst == 0 {
		burst = ListBurst
	}
	return &listThrottle{limit: limit, burst: burst, buckets: map[int64]*rate.Limiter{}}
}

// reserve takes a token of session's bucket; when there is none, it
// returns how long until there is one.
func (t *listThrottle) reserve(session int64, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.buckets[session]
	if !ok {
		if len(t.buckets) >= listThrottleSessions {
			t.dropIdle(now)
		}
		b = rate.NewLimiter(t.limit, t.burst)
		t.buckets[session] = b
	}
	r := b.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}

// dropIdle forgets the buckets that are full again: forgetting them
// changes nothing. Called with mu held.
func (t *listThrottle) dropIdle(now time.Time) {
	for id, b := range t.buckets {
		if b.TokensAt(now) >= float64(t.burst) {
			delete(t.buckets, id)
		}
	}
}

// throttled answers 429 to a signed-in session whose bucket is empty.
// Demo requests (no session) are not throttled: they come from loopback.
func (h *Handler) throttled(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := current(c)
		if p.SessionID == 0 {
			return next(c)
		}
		if wait, ok := h.lists.reserve(p.SessionID, time.Now()); !ok {
			secs := int(math.Ceil(wait.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			return echo.NewHTTPError(http.StatusTooManyRequests,
				"Too many searches at once: try again in "+strconv.Itoa(secs)+" s.")
		}
		return next(c)
	}
}
