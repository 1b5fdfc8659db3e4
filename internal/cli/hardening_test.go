package cli

import (
	"bytes"
	"crypto/rand"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// No request leaves a file behind: multipart bodies larger than echo's
// 32 MiB memory budget (which used to be spooled to the temporary
// directory, and kept there for good) sent to /login, /logout and the JSON
// API, by a client without a session, find the console's TMPDIR empty
// afterwards. And /metrics is served on --metrics-listen only, behind its
// token.
func TestNoRequestLeavesATemporaryFile(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	metricsAddr := consoletest.FreeAddr(t)
	p := consoletest.Serve(t, consoleBinary, []string{
		"DATABASE_URL=" + dbtest.NewURL(t), "TMPDIR=" + tmp, "SWITCHYARD_WORKERS=0",
		"SWITCHYARD_METRICS_TOKEN=s3cret", "SWITCHYARD_METRICS_LISTEN=" + metricsAddr,
	})
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	require.NoError(t, w.WriteField("name", "admin"))
	part, err := w.CreateFormFile("upload", "big.bin")
	require.NoError(t, err)
	_, err = io.CopyN(part, rand.Reader, 33<<20)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/login", "/logout", "/api/replay-jobs"} {
		req, err := http.NewRequest(http.MethodPost, p.URL+path, bytes.NewReader(body.Bytes()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", w.FormDataContentType())
		resp, err := client.Do(req)
		// Refused before the body is read, the connection may be reset
		// while the client still sends.
		if err == nil {
			resp.Body.Close()
			require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, path)
		}
	}
	// The console has answered every request (the last one, after it): no
	// handler is still writing a file.
	metrics := func(base, authorization string) int {
		req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		require.NoError(t, err)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNotFound, metrics(p.URL, "Bearer s3cret"))
	require.Equal(t, http.StatusUnauthorized, metrics("http://"+metricsAddr, ""))
	require.Equal(t, http.StatusOK, metrics("http://"+metricsAddr, "Bearer s3cret"))
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "temporary files left behind")
	p.Stop(t)
}
