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
	"github.com/switchyard/switchyard/internal/testwait"
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
	responses := make(chan *httptest.ResponseRecorder, n)
	testwait.Together(n, func(int) {
		responses <- b.post("key-1", `{"name": "ada"}`)
	})
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

// Answers of requests that did nothing (any 4xx) are not stored; what is
// stored is what a retry needs: the status, the headers that describe the
// result, and a bounded body.
func TestStoresOnlyWhatARetryNeeds(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	e := echo.New()
	mw := Middleware(Config{Pool: pool, MaxStoredBody: 100})
	for _, code := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusBadRequest, http.StatusGone} {
		e.POST("/api/fail/"+strconv.Itoa(code), func(c echo.Context) error {
			return c.HTML(code, "<html>"+strings.Repeat("an error page ", 1000)+"</html>")
		}, mw)
	}
	e.POST("/api/big", func(c echo.Context) error {
		c.SetCookie(&http.Cookie{Name: "one", Value: "response only"})
		c.Response().Header().Set("X-Other", "not kept")
		c.Response().Header().Set("Location", "/api/big/1")
		return c.String(http.StatusCreated, strings.Repeat("x", 101))
	}, mw)
	post := func(path, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`))
		req.Header.Set(Header, key)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	for _, code := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusBadRequest, http.StatusGone} {
		require.Equal(t, code, post("/api/fail/"+strconv.Itoa(code), "k"+strconv.Itoa(code)).Code)
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.idempotency_keys`).Scan(&n))
	require.Zero(t, n, "no answer of a request that did nothing is stored")

	first := post("/api/big", "big")
	require.Equal(t, http.StatusCreated, first.Code)
	require.Len(t, first.Body.String(), 101, "the client gets the whole body the first time")
	replay := post("/api/big", "big")
	require.Equal(t, http.StatusCreated, replay.Code)
	require.Equal(t, "true", replay.Header().Get(ReplayedHeader))
	require.Equal(t, "true", replay.Header().Get(OmittedHeader))
	require.Equal(t, "/api/big/1", replay.Header().Get("Location"))
	require.Empty(t, replay.Header().Get("X-Other"))
	require.Empty(t, replay.Header().Values("Set-Cookie"))
	require.Empty(t, replay.Body.String())
	var stored int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT coalesce(length(response_body), 0) FROM switchyard.idempotency_keys WHERE key = 'big'`).Scan(&stored))
	require.Zero(t, stored)

	for _, key := range []string{"has space", "tab\tkey", "caf\u00e9", strings.Repeat("k", 256)} {
		require.Equal(t, http.StatusBadRequest, post("/api/big", key).Code, "%q", key)
	}
}
