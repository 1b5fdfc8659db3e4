// Package static embeds the console's stylesheet and vendored browser
// libraries and serves them under content-hash URLs.
//
// A page asks for the URL of a logical name such as "vendor/htmx.min.js"
// with [Assets.Path] and gets "/static/vendor/htmx.min.<hash>.js". Because
// the URL changes whenever the bytes do, the handler lets browsers cache
// every response for a year, and a deploy still reaches them at once. Only
// the current hashed URLs are served: a stale or unhashed URL is a 404, so a
// page that forgot to call Path fails loudly in tests instead of quietly
// serving an uncacheable file.
//
// The vendored files are written by scripts/vendor-assets.sh; never edit them
// by hand. The tests check them against vendor/SHA256SUMS.
package static

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the URL path under which the handler serves assets; mount
// [Assets.Handler] there without stripping it.
const Prefix = "/static/"

// hashLen is how many hex digits of the SHA-256 go into a URL: 48 bits is
// plenty to tell apart the versions of one file.
const hashLen = 12

// cacheControl lets browsers and proxies keep a hashed URL forever: its bytes
// never change.
const cacheControl = "public, max-age=31536000, immutable"

// files holds the assets. SHA256SUMS and VERSIONS stay out of it so that
// they are not served.
//
//go:embed *.css *.js vendor/*.js vendor/*.css
var files embed.FS

// Assets serves a fixed set of files under content-hash URLs. It is
// immutable after New and safe for concurrent use.
type Assets struct {
	byName map[string]*asset // logical name, e.g. "vendor/htmx.min.js"
	byURL  map[string]*asset // hashed URL path, e.g. "/static/vendor/htmx.min.0123456789ab.js"
}

// asset is one file and what the handler sends with it.
type asset struct {
	name        string
	url         string
	body        []byte
	contentType string
	etag        string
	integrity   string
}

// New hashes the embedded files. It fails only if a file cannot be read, has
// an extension without a known content type, or would share a URL with
// another.
func New() (*Assets, error) {
	return load(files)
}

// load builds Assets from every regular file in fsys.
func load(fsys fs.FS) (*Assets, error) {
	a := &Assets{byName: map[string]*asset{}, byURL: map[string]*asset{}}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := newAsset(fsys, name)
		if err != nil {
			return err
		}
		if other, ok := a.byURL[f.url]; ok {
			return fmt.Errorf("static asset %s: same URL as %s", name, other.name)
		}
		a.byName[name] = f
		a.byURL[f.url] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load static assets: %w", err)
	}
	return a, nil
}

func newAsset(fsys fs.FS, name string) (*asset, error) {
	ext := path.Ext(name)
	contentType, ok := contentTypeOf(ext)
	if !ok {
		return nil, fmt.Errorf("static asset %s: no content type for %q", name, ext)
	}
	body, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("static asset %s: %w", name, err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	sri := sha512.Sum384(body)
	return &asset{
		name:        name,
		url:         Prefix + strings.TrimSuffix(name, ext) + "." + hash[:hashLen] + ext,
		body:        body,
		contentType: contentType,
		etag:        `"` + hash + `"`,
		integrity:   "sha384-" + base64.StdEncoding.EncodeToString(sri[:]),
	}, nil
}

// contentTypeOf is explicit rather than asking package mime, whose answer for
// ".js" depends on the machine's mime.types. With nosniff a wrong type stops a
// script from running, so an extension missing here fails New.
func contentTypeOf(ext string) (string, bool) {
	switch ext {
	case ".css":
		return "text/css; charset=utf-8", true
	case ".js":
		return "text/javascript; charset=utf-8", true
	}
	return "", false
}

// Path returns the hashed URL path of the logical name, e.g.
// Path("vendor/htmx.min.js") is "/static/vendor/htmx.min.<hash>.js". It
// panics if there is no such file: names are constants in templates, so a
// wrong one is a programming error that any test rendering the page finds.
func (a *Assets) Path(name string) string {
	return a.lookup(name).url
}

// Integrity returns the Subresource Integrity value ("sha384-" and the
// base64 digest) of the logical name, for a script or link tag's integrity
// attribute. Like Path it panics if there is no such file.
func (a *Assets) Integrity(name string) string {
	return a.lookup(name).integrity
}

func (a *Assets) lookup(name string) *asset {
	f, ok := a.byName[name]
	if !ok {
		panic(fmt.Sprintf("static: no asset named %q", name))
	}
	return f
}

// Handler serves GET and HEAD for the hashed URLs that Path returns. It reads
// the whole request path, Prefix included, and answers 404 for anything
// else, including unhashed names and the hashes of earlier builds.
// Conditional and range requests are handled by [http.ServeContent].
func (a *Assets) Handler() http.Handler {
	return http.HandlerFunc(a.serve)
}

func (a *Assets) serve(w http.ResponseWriter, r *http.Request) {
	f, ok := a.byURL[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", cacheControl)
	h.Set("ETag", f.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}
