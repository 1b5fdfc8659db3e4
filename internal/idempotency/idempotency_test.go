package idempotency

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type bundle struct {
	e    *echo.Echo
	pool *pgxpool.Pool
	// gate, when not nil, blocks the handler until it is closed.
	gate chan struct{}
	mu   sync.Mutex
}

// setup serves POST /api/things behind the middleware. The handler writes
// one row to things per request it carries out, answers 201 with the new
// row's id, and refuses {"name": ""} with 422 (a validation failure).
func setup(t *testing.T) *bundle {
	t.Helper()
	pool := dbtest.New(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE things (id bigint GENERATED ALWAYS AS IDENTITY, body text)`)
	require.NoError(t, err)
	b := &bundle{e: echo.New(), pool: pool}
	b.e.POST("/api/things", func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		if strings.Contains(string(body), `"name": ""`) {
			return echo.NewHTTPError(http.StatusUnprocessableEntity, "name is empty")
		}
		b.mu.Lock()
		gate := b.gate
		b.mu.Unlock()
		if gate != nil {
			<-gate
		}
		var id int64
		if err := pool.QueryRow(c.Request().Context(), `INSERT INTO things (body) VALUES ($1) RETURNING id`, string(body)).Scan(&id); err != nil {
			return err
		}
		c.Response().Header().Set("Location", "/api/things/"+strconv.FormatInt(id, 10))
		return c.JSON(http.StatusCreated, map[string]int64{"id": id})
	}, Middleware(Config{Pool: pool}))
	return b
}

func (b *bundle) post(key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/api/things", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(Header, key)
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

func (b *bundle) things(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM things`).Scan(&n))
	return n
}

// 50 concurrent requests with one key: one effect; every response is the
// stored one or 409; the same key with another body gets 422.
func TestConcurrentRequestsWithOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 50
	start := make(chan struct{})
	responses := make(chan *httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			responses <- b.post("key-1", `{"name": "ada"}`)
		})
	}
	close(start)
	wg.Wait()
	close(responses)
	require.Equal(t, 1, b.things(t))
	stored := b.post("key-1", `{"name": "ada"}`)
	require.Equal(t, http.StatusCreated, stored.Code)
	require.Equal(t, "true", stored.Header().Get(ReplayedHeader))
	require.Equal(t, "/api/things/1", stored.Header().Get("Location"))
	created := 0
	for rec := range responses {
		switch rec.Code {
		case http.StatusCreated:
			created++
			require.Equal(t, stored.Body.String(), rec.Body.String(), "the stored response, verbatim")
		case http.StatusConflict:
		default:
			t.Fatalf("unexpected %d: %s", rec.Code, rec.Body)
		}
	}
	require.GreaterOrEqual(t, created, 1)
	require.Equal(t, http.StatusUnprocessableEntity, b.post("key-1", `{"name": "bob"}`).Code)
	require.Equal(t, 1, b.things(t))
}

// While the first request is in flight, the others get 409; afterwards,
// the stored response.
func TestInFlightIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.gate = make(chan struct{})
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- b.post("k", `{"name": "ada"}`) }()
	// The first request holds the key once its row exists in flight.
	require.Eventually(t, func() bool {
		var status string
		err := b.pool.QueryRow(context.Background(), `SELECT status FROM switchyard.idempotency_keys WHERE key = 'k'`).Scan(&status)
		return err == nil && status == "in_flight"
	}, 30*time.Second, 10*time.Millisecond)
	for range 3 {
		require.Equal(t, http.StatusConflict, b.post("k", `{"name": "ada"}`).Code)
	}
	require.Equal(t, http.StatusUnprocessableEntity, b.post("k", `{"name": "eve"}`).Code, "a different request is refused even in flight")
	close(b.gate)
	rec := <-first
	require.Equal(t, http.StatusCreated, rec.Code)
	replay := b.post("k", `{"name": "ada"}`)
	require.Equal(t, rec.Body.String(), replay.Body.String())
	require.Equal(t, 1, b.things(t))
}

// A validation failure is not stored: the key may carry the corrected
// request. Requests without a key are not deduplicated. An expired key is
// new again.
func TestValidationFailuresAndExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, http.StatusUnprocessableEntity, b.post("k", `{"name": ""}`).Code)
	require.Equal(t, http.StatusCreated, b.post("k", `{"name": "ada"}`).Code, "the failed request left nothing under the key")
	require.Equal(t, http.StatusCreated, b.post("", `{"name": "ada"}`).Code)
	require.Equal(t, http.StatusCreated, b.post("", `{"name": "ada"}`).Code)
	require.Equal(t, 3, b.things(t))

	_, err := b.pool.Exec(context.Background(), `UPDATE switchyard.idempotency_keys SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	rec := b.post("k", `{"name": "ada"}`)
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Empty(t, rec.Header().Get(ReplayedHeader), "carried out again, not replayed")
	require.Equal(t, 4, b.things(t))
	n, err := Prune(context.Background(), b.pool)
	require.NoError(t, err)
	require.Zero(t, n, "the key was renewed, not expired")
	require.Equal(t, http.StatusBadRequest, b.post(strings.Repeat("k", 256), `{}`).Code)
}

// A handler that panics does not leave its key in flight: the retry runs.
func TestPanickingHandlerReleasesItsKey(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	e := echo.New()
	e.Use(middleware.Recover())
	var calls atomic.Int64
	e.POST("/api/boom", func(c echo.Context) error {
		if calls.Add(1) == 1 {
			panic("handler bug")
		}
		return c.JSON(http.StatusCreated, map[string]string{"ok": "yes"})
	}, Middleware(Config{Pool: pool}))
	post := func() int {
		req := httptest.NewRequest(http.MethodPost, "/api/boom", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(Header, "k1")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusInternalServerError, post())
	require.Equal(t, http.StatusCreated, post(), "the retry runs, not 409")
	require.Equal(t, int64(2), calls.Load())
}
