package httpserver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/httpserver"
)

// serve runs e on a loopback port with cfg until the test ends.
func serve(t *testing.T, e http.Handler, cfg httpserver.ServeConfig) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.ShutdownTimeout = 5 * time.Second
	go func() { ran <- httpserver.Run(ctx, e, ln, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-ran)
	})
	return ln.Addr().String()
}

// multipartBody is a form with one file part of size bytes.
func multipartBody(t *testing.T, size int) (*bytes.Buffer, string) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	require.NoError(t, w.WriteField("name", "admin"))
	part, err := w.CreateFormFile("upload", "big.bin")
	require.NoError(t, err)
	_, err = io.CopyN(part, rand.Reader, int64(size))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return &body, w.FormDataContentType()
}

// No temporary file survives a request. A multipart form larger than
// echo's 32 MiB memory budget is spooled to disk; it used to be parsed on
// a copy of the request (the CSRF check reading _csrf, after middleware
// replaced the request with req.WithContext), whose files net/http never
// removes. Now multipart is refused (415) before anything reads it.
func TestNoUploadOutlivesItsRequest(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(), CSRF: &httpserver.CSRFConfig{},
		BodyLimit: func(echo.Context) int64 { return 64 << 20 }, // even a route that took this much
	})
	require.NoError(t, err)
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, c.FormValue("name")) })
	e.POST("/api/act", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	addr := serve(t, e, httpserver.ServeConfig{})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/login", "/api/act"} {
		body, ct := multipartBody(t, 33<<20)
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		resp, err := client.Do(req)
		// The server answers without reading the body and closes the
		// connection: the client may see the reset while still sending.
		if err == nil {
			require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, path)
			resp.Body.Close()
		}
	}
	// A small multipart form is refused too, though it would stay in memory.
	body, ct := multipartBody(t, 100)
	req := httptest.NewRequest(http.MethodPost, "/login", body)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnsupportedMediaType, rec.Code)

	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "temporary files left behind")
}

// Every route takes a body of its size at most: forms FormMaxBody unless
// the route says more; a body larger than announced or sent in chunks is
// cut at the limit too.
func TestBodiesOverTheRouteLimitAre413(t *testing.T) {
	t.Parallel()
	const apiMax = 64 << 10
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		BodyLimit: func(c echo.Context) int64 {
			if c.Path() == "/api/act" {
				return apiMax
			}
			return 0
		},
	})
	require.NoError(t, err)
	read := func(c echo.Context) error {
		n, err := io.Copy(io.Discard, c.Request().Body)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, n)
	}
	e.POST("/form", read)
	e.POST("/api/act", read)
	post := func(path string, size int, chunked bool) int {
		var body io.Reader = strings.NewReader(url.Values{"reason": {strings.Repeat("x", size)}}.Encode())
		if chunked {
			body = io.MultiReader(body) // hides the length
		}
		req := httptest.NewRequest(http.MethodPost, path, body)
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, chunked := range []bool{false, true} {
		require.Equal(t, http.StatusOK, post("/form", 8<<10, chunked))
		require.Equal(t, http.StatusRequestEntityTooLarge, post("/form", httpserver.FormMaxBody, chunked))
		require.Equal(t, http.StatusOK, post("/api/act", 32<<10, chunked))
		require.Equal(t, http.StatusRequestEntityTooLarge, post("/api/act", apiMax, chunked))
	}
}
