// Package idempotency makes the console's JSON API safe to retry: a request
// that carries an Idempotency-Key header takes effect at most once per
// (principal, key), and every retry gets the first response back.
//
// Middleware, per request with a key:
//
//   - first request with the key: its row is inserted in flight (in a
//     transaction of its own, committed before the handler runs), the
//     handler runs, and what a retry needs of its response is stored: the
//     status, the few headers that describe the result (storedHeaders) and
//     the body up to Config.MaxStoredBody (a longer body is not kept: its
//     retries get the status and headers, with Idempotent-Body-Omitted);
//   - same key, same request (method, path, query and body: the request
//     fingerprint), response stored: that response (status, kept headers,
//     body), with Idempotent-Replayed: true;
//   - same key while the first request is still in flight: 409 Conflict;
//   - same key, different request: 422 Unprocessable Entity;
//   - a response that says the request was not carried out is not stored,
//     and the key is free again: every 4xx (a validation failure, a refusal,
//     nothing found, a conflict, a rate limit: the request did nothing) and
//     every 5xx (which in this console means the handler's transaction
//     rolled back). Only 2xx and 3xx answers are kept, so a client cannot
//     fill the store with error pages;
//   - a key is 1 to 255 visible ASCII characters (a UUID fits); others are
//     refused with 400;
//   - keys expire after Config.TTL (24 h by default); an expired key is
//     like a new one.
//
// A process that dies while a request is in flight leaves its key in
// flight until it expires: retries get 409 rather than risk a second
// effect, since the first one may have committed.
//
// The principal scopes keys, so that two clients cannot collide or read
// each other's stored responses. Until the console has accounts it is
// the client's address (Config.Principal's default); with sessions it
// becomes the signed-in user.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks a response served from the store.
const ReplayedHeader = "Idempotent-Replayed"

// OmittedHeader marks a stored response whose body was too long to keep.
const OmittedHeader = "Idempotent-Body-Omitted"

// DefaultMaxStoredBody is Config.MaxStoredBody's default.
const DefaultMaxStoredBody = 64 << 10

// DefaultTTL is how long a key is kept when Config.TTL is 0.
const DefaultTTL = 24 * time.Hour

// maxKeyLength bounds a key (the table's check).
const maxKeyLength = 255

// Config configures Middleware.
type Config struct {
	Pool *pgxpool.Pool
	// TTL: how long a key and its response are kept; 0: DefaultTTL.
	TTL time.Duration
	// Principal names who sent the request; nil: "addr:" + the peer's IP
	// address (echo's RealIP, which the console resolves to the peer's
	// address, never a forwarded one).
	Principal func(c echo.Context) string
	// MaxBody bounds the request body read for the fingerprint; 0: 1 MiB.
	MaxBody int64
	// MaxStoredBody bounds the response body stored for retries; 0:
	// DefaultMaxStoredBody.
	MaxStoredBody int
	Logger        *slog.Logger
}

// Middleware applies idempotency keys to the requests it wraps (meant for
// the JSON API's unsafe methods). Requests without the header pass
// through untouched.
func Middleware(cfg Config) echo.MiddlewareFunc {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Principal == nil {
		cfg.Principal = func(c echo.Context) string { return "addr:" + c.RealIP() }
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.MaxStoredBody <= 0 {
		cfg.MaxStoredBody = DefaultMaxStoredBody
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key := c.Request().Header.Get(Header)
			if key == "" {
				return next(c)
			}
			if !validKey(key) {
				return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("%s must be 1 to %d visible ASCII characters", Header, maxKeyLength))
			}
			fp, err := fingerprint(c, cfg.MaxBody)
			if err != nil {
				return err
			}
			return cfg.serve(c, next, cfg.Principal(c), key, fp)
		}
	}
}

// validKey reports whether key is 1 to maxKeyLength visible ASCII
// characters: no spaces, controls or bytes a log or a page would mangle.
func validKey(key string) bool {
	if len(key) > maxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return key != ""
}

// fingerprint hashes what makes a request the same request, and puts the
// body back for the handler.
func fingerprint(c echo.Context, limit int64) (string, error) {
	req := c.Request()
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return "", echo.NewHTTPError(http.StatusBadRequest, "could not read the body")
	}
	if int64(len(body)) > limit {
		return "", echo.NewHTTPError(http.StatusRequestEntityTooLarge, "body too large")
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	h := sha256.New()
	for _, part := range []string{req.Method, req.URL.Path, req.URL.RawQuery} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (cfg Config) serve(c echo.Context, next echo.HandlerFunc, principal, key, fp string) error {
	ctx := c.Request().Context()
	q := queries.New(cfg.Pool)
	claimed, err := q.IdempotencyKeyClaim(ctx, queries.IdempotencyKeyClaimParams{
		Principal: principal, Key: key, RequestFingerprint: fp, TtlSeconds: cfg.TTL.Seconds(),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return cfg.answerTaken(c, principal, key, fp)
	}
	if err != nil {
		return fmt.Errorf("idempotency: claim key: %w", err)
	}
	return cfg.runAndStore(c, next, principal, key, claimed)
}

// answerTaken answers a request whose key is already taken.
func (cfg Config) answerTaken(c echo.Context, principal, key, fp string) error {
	row, err := queries.New(cfg.Pool).IdempotencyKeyGet(c.Request().Context(), queries.IdempotencyKeyGetParams{Principal: principal, Key: key})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The first request was just released (it stored nothing).
		return echo.NewHTTPError(http.StatusConflict, "a request with this Idempotency-Key was in flight; retry")
	case err != nil:
		return fmt.Errorf("idempotency: read key: %w", err)
	case row.RequestFingerprint != fp:
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "this Idempotency-Key was used for a different request")
	case row.Status != "done" || row.ResponseStatus == nil:
		return echo.NewHTTPError(http.StatusConflict, "a request with this Idempotency-Key is still in flight")
	}
	var headers map[string][]string
	if err := json.Unmarshal(row.ResponseHeaders, &headers); err != nil {
		return fmt.Errorf("idempotency: decode stored headers: %w", err)
	}
	h := c.Response().Header()
	for name, values := range headers {
		h[name] = values
	}
	h.Set(ReplayedHeader, "true")
	c.Response().WriteHeader(int(*row.ResponseStatus))
	_, err = c.Response().Write(row.ResponseBody)
	return err
}

// runAndStore runs the handler with the response captured, then stores it
// or releases the key.
func (cfg Config) runAndStore(c echo.Context, next echo.HandlerFunc, principal, key string, claimed time.Time) error {
	capture := &capturingWriter{ResponseWriter: c.Response().Writer, limit: cfg.MaxStoredBody}
	c.Response().Writer = capture
	defer func() {
		if r := recover(); r != nil {
			// A panicking handler answers 500 (the recover middleware):
			// release the key, or every retry would get 409 until it
			// expires. Then let the panic go on to that middleware.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
			defer cancel()
			err := queries.New(cfg.Pool).IdempotencyKeyRelease(ctx, queries.IdempotencyKeyReleaseParams{Principal: principal, Key: key, CreatedAt: claimed})
			if err != nil {
				cfg.log(ctx, "release idempotency key after a panic", err)
			}
			panic(r)
		}
	}()
	if err := next(c); err != nil {
		// The error handler writes the response now, while it is
		// captured: that response is the one to store or not.
		c.Error(err)
	}
	// The outcome is recorded even when the client has gone.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
	defer cancel()
	q := queries.New(cfg.Pool)
	status := c.Response().Status
	if !stored(status) {
		if err := q.IdempotencyKeyRelease(ctx, queries.IdempotencyKeyReleaseParams{Principal: principal, Key: key, CreatedAt: claimed}); err != nil {
			cfg.log(ctx, "release idempotency key", err)
		}
		return nil
	}
	kept, body := storedHeaders(c.Response().Header()), capture.body.Bytes()
	if capture.body.Len() > cfg.MaxStoredBody {
		kept.Set(OmittedHeader, "true")
		body = nil
	}
	headers, err := json.Marshal(kept)
	if err == nil {
		s := int32(status)
		err = q.IdempotencyKeyComplete(ctx, queries.IdempotencyKeyCompleteParams{
			ResponseStatus: &s, ResponseHeaders: headers, ResponseBody: body,
			Principal: principal, Key: key, CreatedAt: claimed,
		})
	}
	if err != nil {
		// The response is sent; the key stays in flight until it
		// expires, so a retry gets 409, never a second effect.
		cfg.log(ctx, "store idempotent response", err)
	}
	return nil
}

func (cfg Config) log(ctx context.Context, what string, err error) {
	if cfg.Logger != nil {
		cfg.Logger.ErrorContext(ctx, what, slog.Any("error", err))
	}
}

// stored reports whether a response with status is kept for replays:
// only answers of requests that were carried out (2xx, 3xx). See the
// package documentation.
func stored(status int) bool { return status >= 200 && status < 400 }

// keptHeaders are the response headers a retry needs: what the result is
// and where it is. Others (cookies, security headers, caching, dates)
// belong to one response and are set afresh on the replay.
var keptHeaders = []string{"Content-Type", "Location", "Retry-After"}

// storedHeaders returns the headers of h that are stored for retries.
func storedHeaders(h http.Header) http.Header {
	kept := http.Header{}
	for _, name := range keptHeaders {
		if v := h.Values(name); len(v) > 0 {
			kept[name] = v
		}
	}
	return kept
}

// capturingWriter keeps a copy of the body written through it, up to
// limit+1 bytes: enough to know that a body is too long to store, without
// holding all of a long one.
type capturingWriter struct {
	http.ResponseWriter
	limit int
	body  bytes.Buffer
}

func (w *capturingWriter) Write(b []byte) (int, error) {
	if room := w.limit + 1 - w.body.Len(); room > 0 {
		w.body.Write(b[:min(len(b), room)])
	}
	return w.ResponseWriter.Write(b)
}

// Prune deletes expired keys and returns how many. The console's
// retention service (internal/retention) deletes them on a schedule, in
// batches; this is for tools and tests.
func Prune(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	n, err := queries.New(pool).IdempotencyKeyPrune(ctx)
	if err != nil {
		return 0, fmt.Errorf("idempotency: prune expired keys: %w", err)
	}
	return n, nil
}
