package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// playwrightVersion is the playwright-core release the driver directory must
// hold: the one github.com/mxschmitt/playwright-go v0.6401.0 was built for.
// scripts/setup.sh installs the same one.
const playwrightVersion = "1.64.1"

// chromiumPath is Debian's Chromium headless shell (package
// chromium-headless-shell, built from the same source as package chromium:
// the same Blink, the same version), which matches the driver; playwright's
// own browser downloads are never used. The shell renders pages as Chromium
// does without the browser around them: measured on the widths and on-call
// tests, it takes a third less CPU than the full browser in headless mode,
// and the browser tests are most of `make test`'s time.
const chromiumPath = "/usr/lib/chromium/chromium-headless-shell"

// chromiumArgs keep Chromium quiet on a machine without internet: without the
// background-networking flags it keeps trying to reach Google services.
var chromiumArgs = []string{
	"--no-sandbox", // we run as root
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
}

// TestMain starts the suite (the console binary and one Chromium) once,
// runs the tests, and stops it before dbtest's goroutine-leak check.
func TestMain(m *testing.M) {
	dbtest.MainWith(m, func() (func(), error) {
		s, err := startSuite()
		if err != nil {
			return nil, err
		}
		shared = s
		return func() {
			if err := s.stop(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: stop the browser suite:", err)
			}
		}, nil
	})
}

// suite is what the tests of this binary share: the console binary, built
// once, and one Chromium. Each test opens its own browser context in it.
type suite struct {
	root    string // repository root
	binDir  string // temporary directory holding binary
	binary  string // path of the console binary
	pw      *playwright.Playwright
	browser playwright.Browser
}

// shared is the suite of this test binary, set by TestMain before any test
// runs and only read afterwards.
var shared *suite

// useSuite returns the running suite.
func useSuite(t *testing.T) *suite {
	t.Helper()
	require.NotNil(t, shared, "the browser suite is started by TestMain")
	return shared
}

// startSuite builds the console and launches Chromium through the
// playwright driver that scripts/setup.sh installed. It never downloads.
func startSuite() (s *suite, err error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	driverDir, err := driverDirectory(root)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		return nil, fmt.Errorf("chromium not found at %s (run scripts/setup.sh): %w", chromiumPath, err)
	}
	s = &suite{root: root}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.stop())
		}
	}()
	if err := s.build(); err != nil {
		return s, err
	}
	opts := &playwright.RunOptions{DriverDirectory: driverDir, SkipInstallBrowsers: true}
	// With the driver present, Install only checks its version and applies
	// playwright-go's small patch to the driver bundle: it stays offline.
	if err := playwright.Install(opts); err != nil {
		return s, fmt.Errorf("check the playwright driver in %s (run scripts/setup.sh): %w", driverDir, err)
	}
	if s.pw, err = playwright.Run(opts); err != nil {
		return s, fmt.Errorf("start the playwright driver: %w", err)
	}
	s.browser, err = s.pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromiumPath),
		Headless:       playwright.Bool(true),
		Args:           chromiumArgs,
	})
	if err != nil {
		return s, fmt.Errorf("launch %s: %w", chromiumPath, err)
	}
	return s, nil
}

// build compiles ./cmd/console into a temporary directory.
func (s *suite) build() error {
	dir, err := os.MkdirTemp("", "switchyard-e2e-")
	if err != nil {
		return fmt.Errorf("create the binary directory: %w", err)
	}
	s.binDir = dir
	s.binary, err = consoletest.Build(dir)
	return err
}

// stop closes the browser, stops the driver and removes the binary. It
// accepts a partly started suite.
func (s *suite) stop() error {
	var errs []error
	if s.browser != nil {
		if err := s.browser.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close chromium: %w", err))
		}
	}
	if s.pw != nil {
		if err := s.pw.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the playwright driver: %w", err))
		}
	}
	if s.binDir != "" {
		if err := os.RemoveAll(s.binDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// driverDirectory returns the playwright driver directory:
// $PLAYWRIGHT_DRIVER_PATH or the one scripts/setup.sh fills. It must exist,
// because playwright-go downloads a driver into a directory without one.
func driverDirectory(root string) (string, error) {
	dir := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if dir == "" {
		dir = filepath.Join(root, ".tools", "playwright-driver-"+playwrightVersion)
	}
	for _, name := range []string{"node", filepath.Join("package", "cli.js")} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("no playwright driver %s in %s: run scripts/setup.sh (or set PLAYWRIGHT_DRIVER_PATH): %w", playwrightVersion, dir, err)
		}
	}
	return dir, nil
}

// repoRoot is the directory holding go.mod, found upwards from the working
// directory (the package directory under go test).
var repoRoot = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
})

// expectTimeout bounds every browser assertion (ms). The suite runs beside
// the other packages' tests, race detector on, on a 2-core machine: at a
// load of 25 a page's stream opened 17 s after its HTML arrived (measured).
// The bound says how slow a loaded machine may be, never how fast the
// console is (that is benchmarked); an assertion that holds returns at once.
const expectTimeout = 20000

// newExpect returns assertions whose default timeout is expectTimeout.
func newExpect() playwright.PlaywrightAssertions {
	return playwright.NewPlaywrightAssertions(expectTimeout)
}

// screenshot saves a full-page PNG of page as <name>.png in $E2E_SCREENSHOTS,
// or else in e2e/screenshots (ignored by git), for a person to look at.
// E2E_SCREENSHOTS=off takes none: CI runs on a clone that nobody looks
// into, and the captures were a fifth of the browser tests' CPU on two
// cores.
func screenshot(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	dir := os.Getenv("E2E_SCREENSHOTS")
	if dir == "off" {
		return
	}
	if dir == "" {
		root, err := repoRoot()
		require.NoError(t, err)
		dir = filepath.Join(root, "e2e", "screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name+".png")
	// Caret "initial": hiding the caret leaves style="" on every input,
	// which htmx then copies when it settles a swap, and the strict CSP
	// refuses: a screenshot must not change the page it records.
	_, err := page.Screenshot(playwright.PageScreenshotOptions{FullPage: playwright.Bool(true), Path: &path,
		Caret: playwright.ScreenshotCaretInitial})
	require.NoError(t, err, "screenshot %s", name)
	t.Logf("screenshot: %s", path)
}

// newPage opens a page in a browser context of its own, with baseURL for
// relative URLs. When the test ends the context is closed, and every console
// error, CSP violation and uncaught exception the browser reported fails the
// test.
func newPage(t *testing.T, baseURL string) playwright.Page {
	t.Helper()
	return newPageTolerating(t, baseURL, nil)
}

// newPageTolerating is newPage for a test in which the browser is expected
// to report some problems: those expected (nil: none) returns true for are
// logged instead of failing the test.
func newPageTolerating(t *testing.T, baseURL string, expected func(problem string) bool) playwright.Page {
	t.Helper()
	return newPageWith(t, baseURL, expected, playwright.BrowserNewContextOptions{})
}

// newPageWith is newPageTolerating in a browser context opened with opts
// (a time zone, a viewport); BaseURL is set from baseURL.
func newPageWith(t *testing.T, baseURL string, expected func(problem string) bool, opts playwright.BrowserNewContextOptions) playwright.Page {
	t.Helper()
	bctx, log := openContextWith(t, baseURL, opts)
	t.Cleanup(func() {
		// Close first, so that everything the page did has been reported.
		if err := bctx.Close(); err != nil {
			t.Errorf("close the browser context: %v", err)
		}
		for _, p := range log.problems() {
			if expected != nil && expected(p) {
				t.Logf("expected: %s", p)
				continue
			}
			t.Errorf("browser reported: %s", p)
		}
	})
	page, err := bctx.NewPage()
	require.NoError(t, err, "open a page")
	return page
}

// cspListener makes the page itself report CSP violations as console errors,
// so that one is caught even if Chromium stops logging it. Playwright
// injects init scripts outside the page's CSP.
const cspListener = `document.addEventListener("securitypolicyviolation", (e) => {
	console.error("CSP violation: " + e.disposition + " " + e.effectiveDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
});`

// openContext opens a browser context whose problems are recorded in the
// returned log. The context is closed when the test ends.
func openContext(t *testing.T, baseURL string) (playwright.BrowserContext, *browserLog) {
	t.Helper()
	return openContextWith(t, baseURL, playwright.BrowserNewContextOptions{})
}

// openContextWith is openContext with further context options.
func openContextWith(t *testing.T, baseURL string, opts playwright.BrowserNewContextOptions) (playwright.BrowserContext, *browserLog) {
	t.Helper()
	s := useSuite(t)
	opts.BaseURL = playwright.String(baseURL)
	bctx, err := s.browser.NewContext(opts)
	require.NoError(t, err, "open a browser context")
	t.Cleanup(func() { _ = bctx.Close() }) // a no-op when closed already
	log := &browserLog{}
	bctx.OnConsole(log.console)
	bctx.OnWebError(log.webError)
	require.NoError(t, bctx.AddInitScript(playwright.Script{Content: playwright.String(cspListener)}))
	return bctx, log
}

// browserLog records what a browser context reported that should fail a
// test. Playwright calls its methods from its own goroutine.
type browserLog struct {
	mu    sync.Mutex
	found []string // guarded by mu
}

func (l *browserLog) console(m playwright.ConsoleMessage) {
	text := m.Text()
	if m.Type() != "error" && !strings.Contains(text, "Content Security Policy") && !strings.HasPrefix(text, "CSP violation") {
		return
	}
	where := ""
	if loc := m.Location(); loc != nil && loc.URL != "" {
		where = fmt.Sprintf(" (%s:%d)", loc.URL, loc.Line+1)
	}
	l.add(fmt.Sprintf("console %s: %s%s", m.Type(), text, where))
}

func (l *browserLog) webError(e playwright.WebError) {
	l.add(fmt.Sprintf("uncaught exception: %v", e.Error()))
}

func (l *browserLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.found = append(l.found, s)
}

// problems returns what was recorded so far.
func (l *browserLog) problems() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.found)
}

// heldAnswer is the answer to the first htmx request to a URL, held back
// from htmx until release: for reproducing an answer that lands late,
// after newer ones.
type heldAnswer struct {
	page    playwright.Page
	pattern string
}

// holdAnswerScript wraps the page's XMLHttpRequest so that the first
// request whose URL matches the pattern is sent and answered as usual,
// but htmx sees its answer (its onload) only once released. In the
// browser, not in a route: a route's fetch is not the browser's request
// (it lacks Sec-Fetch-Site, which the CSRF check reads).
const holdAnswerScript = `(pattern) => {
	const matches = new RegExp(pattern);
	const held = { arrived: false, delivered: false };
	held.released = new Promise((resolve) => { held.release = resolve; });
	window.heldAnswer = held;
	const open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
	let used = false;
	XMLHttpRequest.prototype.open = function (method, url, ...rest) {
		this.heldURL = String(url);
		return open.call(this, method, url, ...rest);
	};
	XMLHttpRequest.prototype.send = function (...args) {
		if (!used && matches.test(this.heldURL)) {
			used = true;
			const xhr = this, onload = xhr.onload;
			xhr.onload = function (ev) {
				held.arrived = true;
				held.released.then(() => { held.delivered = true; onload.call(xhr, ev); });
			};
		}
		return send.apply(this, args);
	};
}`

// holdAnswer holds the answer to the page's next htmx request whose URL
// matches pattern (a JavaScript regular expression) until release. A
// navigation of the page ends the hold.
func holdAnswer(t *testing.T, page playwright.Page, pattern string) *heldAnswer {
	t.Helper()
	_, err := page.Evaluate(holdAnswerScript, pattern)
	require.NoError(t, err)
	return &heldAnswer{page: page, pattern: pattern}
}

func (h *heldAnswer) is(t *testing.T, what string) bool {
	v, err := h.page.Evaluate(`(what) => window.heldAnswer[what]`, what)
	require.NoError(t, err)
	b, ok := v.(bool)
	return ok && b
}

// arrived waits until the held request's answer has come from the server.
func (h *heldAnswer) arrived(t *testing.T) {
	t.Helper()
	testwait.Until(t, expectTimeout*time.Millisecond, "the answer to "+h.pattern+" arrived", func() bool { return h.is(t, "arrived") })
}

// release hands the held answer to htmx and waits until it has.
func (h *heldAnswer) release(t *testing.T) {
	t.Helper()
	_, err := h.page.Evaluate(`() => window.heldAnswer.release()`)
	require.NoError(t, err)
	testwait.Until(t, expectTimeout*time.Millisecond, "the answer to "+h.pattern+" handed to htmx", func() bool { return h.is(t, "delivered") })
}
