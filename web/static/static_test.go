package static

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func setup(t *testing.T) *Assets {
	t.Helper()
	a, err := New()
	require.NoError(t, err)
	return a
}

// embeddedNames lists every embedded file; at least app.css and the five
// vendored files.
func embeddedNames(t *testing.T) []string {
	t.Helper()
	var names []string
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			names = append(names, name)
		}
		return err
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(names), 6, "embedded files: %v", names)
	return names
}

func get(t *testing.T, a *Assets, method, target string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	return rec
}

func TestPath(t *testing.T) {
	t.Parallel()
	a := setup(t)
	tests := []struct {
		name string
		want string // regexp
	}{
		{"app.css", `^/static/app\.[0-9a-f]{12}\.css$`},
		{"vendor/htmx.min.js", `^/static/vendor/htmx\.min\.[0-9a-f]{12}\.js$`},
		{"vendor/htmx-ext-sse.js", `^/static/vendor/htmx-ext-sse\.[0-9a-f]{12}\.js$`},
		{"vendor/idiomorph-ext.min.js", `^/static/vendor/idiomorph-ext\.min\.[0-9a-f]{12}\.js$`},
		{"vendor/uPlot.iife.min.js", `^/static/vendor/uPlot\.iife\.min\.[0-9a-f]{12}\.js$`},
		{"vendor/uPlot.min.css", `^/static/vendor/uPlot\.min\.[0-9a-f]{12}\.css$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Regexp(t, regexp.MustCompile(tt.want), a.Path(tt.name))
		})
	}
}

func TestPathEveryEmbeddedFile(t *testing.T) {
	t.Parallel()
	a := setup(t)
	for _, name := range embeddedNames(t) {
		body, err := files.ReadFile(name)
		require.NoError(t, err)
		sum := sha256.Sum256(body)
		hash := hex.EncodeToString(sum[:])[:hashLen]
		require.Contains(t, a.Path(name), "."+hash+".", name)
	}
}

func TestPathUnknownPanics(t *testing.T) {
	t.Parallel()
	a := setup(t)
	for _, name := range []string{
		"",
		"nope.css",
		"vendor/htmx.js",
		"/static/app.css",
		"static/app.css",
		"vendor/SHA256SUMS",
		"vendor/VERSIONS",
		strings.TrimPrefix(a.Path("app.css"), Prefix),
	} {
		require.Panics(t, func() { a.Path(name) }, "Path(%q)", name)
		require.Panics(t, func() { a.Integrity(name) }, "Integrity(%q)", name)
	}
}

func TestIntegrity(t *testing.T) {
	t.Parallel()
	a := setup(t)
	for _, name := range embeddedNames(t) {
		body, err := files.ReadFile(name)
		require.NoError(t, err)
		sum := sha512.Sum384(body)
		require.Equal(t, "sha384-"+base64.StdEncoding.EncodeToString(sum[:]), a.Integrity(name), name)
	}
}

func TestHandlerServesHashedURL(t *testing.T) {
	t.Parallel()
	a := setup(t)
	wantType := map[string]string{
		".css": "text/css; charset=utf-8",
		".js":  "text/javascript; charset=utf-8",
	}
	for _, name := range embeddedNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body, err := files.ReadFile(name)
			require.NoError(t, err)
			ext := name[strings.LastIndex(name, "."):]
			require.Contains(t, wantType, ext)

			for _, method := range []string{http.MethodGet, http.MethodHead} {
				rec := get(t, a, method, a.Path(name), nil)
				require.Equal(t, http.StatusOK, rec.Code, method)
				h := rec.Header()
				require.Equal(t, wantType[ext], h.Get("Content-Type"), method)
				require.Equal(t, "public, max-age=31536000, immutable", h.Get("Cache-Control"), method)
				require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), method)
				require.Regexp(t, `^"[0-9a-f]{64}"$`, h.Get("ETag"), method)
				require.Equal(t, strconv.Itoa(len(body)), h.Get("Content-Length"), method)
				if method == http.MethodGet {
					require.True(t, bytes.Equal(body, rec.Body.Bytes()), "served bytes differ from %s", name)
				} else {
					require.Zero(t, rec.Body.Len(), "HEAD has a body")
				}
			}
		})
	}
}

func TestHandlerConditionalGet(t *testing.T) {
	t.Parallel()
	a := setup(t)
	url := a.Path("vendor/htmx.min.js")
	etag := get(t, a, http.MethodGet, url, nil).Header().Get("ETag")
	require.NotEmpty(t, etag)

	rec := get(t, a, http.MethodGet, url, http.Header{"If-None-Match": {etag}})
	require.Equal(t, http.StatusNotModified, rec.Code)
	require.Zero(t, rec.Body.Len())

	rec = get(t, a, http.MethodGet, url, http.Header{"If-None-Match": {`"stale"`}})
	require.Equal(t, http.StatusOK, rec.Code)
}

func TestHandlerNotFound(t *testing.T) {
	t.Parallel()
	a := setup(t)
	htmx := a.Path("vendor/htmx.min.js")
	css := a.Path("app.css")
	tests := []struct {
		name   string
		target string
	}{
		{"unhashed", "/static/vendor/htmx.min.js"},
		{"unhashed app.css", "/static/app.css"},
		{"wrong hash", "/static/vendor/htmx.min.000000000000.js"},
		{"hash of another file", strings.Replace(htmx, hashOf(t, htmx), hashOf(t, css), 1)},
		{"full hash", strings.Replace(htmx, hashOf(t, htmx), strings.Repeat(hashOf(t, htmx), 2), 1)},
		{"no prefix", strings.TrimPrefix(htmx, "/static")},
		{"other prefix", "/assets" + strings.TrimPrefix(htmx, "/static")},
		{"trailing slash", htmx + "/"},
		{"prefix", "/static/"},
		{"directory", "/static/vendor/"},
		{"manifest", "/static/vendor/SHA256SUMS"},
		{"versions", "/static/vendor/VERSIONS"},
		{"source", "/static/static.go"},
		{"traversal", "/static/vendor/../app.css"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				rec := get(t, a, method, tt.target, nil)
				require.Equal(t, http.StatusNotFound, rec.Code, "%s %s", method, tt.target)
				require.Empty(t, rec.Header().Get("Cache-Control"), "a 404 must not be cached forever")
			}
		})
	}
}

func TestHandlerMethodNotAllowed(t *testing.T) {
	t.Parallel()
	a := setup(t)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec := get(t, a, method, a.Path("app.css"), nil)
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code, method)
		require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"), method)
	}
}

// TestVendorMatchesSHA256SUMS fails when a vendored file was edited by hand,
// or added or removed without running scripts/vendor-assets.sh.
func TestVendorMatchesSHA256SUMS(t *testing.T) {
	t.Parallel()
	manifest, err := os.ReadFile("vendor/SHA256SUMS")
	require.NoError(t, err)

	listed := map[string]bool{}
	lines := bufio.NewScanner(bytes.NewReader(manifest))
	for lines.Scan() {
		sum, name, ok := strings.Cut(lines.Text(), "  ")
		require.True(t, ok, "malformed SHA256SUMS line %q", lines.Text())
		body, err := files.ReadFile("vendor/" + name)
		require.NoError(t, err, "SHA256SUMS lists %s but it is not embedded", name)
		got := sha256.Sum256(body)
		require.Equal(t, sum, hex.EncodeToString(got[:]), "vendor/%s does not match SHA256SUMS; run scripts/vendor-assets.sh", name)
		listed["vendor/"+name] = true
	}
	require.NoError(t, lines.Err())
	require.NotEmpty(t, listed)

	for _, name := range embeddedNames(t) {
		if strings.HasPrefix(name, "vendor/") {
			require.True(t, listed[name], "%s is embedded but not listed in SHA256SUMS", name)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	a, err := load(fstest.MapFS{
		"a.css":      {Data: []byte("x")},
		"lib/b.js":   {Data: []byte("y")},
		"lib/c.d.js": {Data: []byte("y")},
	})
	require.NoError(t, err)
	// sha256("x") = 2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881
	require.Equal(t, "/static/a.2d711642b726.css", a.Path("a.css"))
	// sha256("y") = a1fce4363854ff888cff4b8e7875d600c2682390412a8cf79b37d0b11148b0fa
	require.Equal(t, "/static/lib/b.a1fce4363854.js", a.Path("lib/b.js"))
	require.Equal(t, "/static/lib/c.d.a1fce4363854.js", a.Path("lib/c.d.js"))
}

func TestLoadUnknownExtension(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"logo.png", "README", "vendor/x.map"} {
		_, err := load(fstest.MapFS{name: {Data: []byte("x")}})
		require.ErrorContains(t, err, name)
	}
}

// hashOf returns the hash part of a hashed URL.
func hashOf(t *testing.T, url string) string {
	t.Helper()
	m := regexp.MustCompile(`\.([0-9a-f]{12})\.[a-z]+$`).FindStringSubmatch(url)
	require.Len(t, m, 2, url)
	return m[1]
}
