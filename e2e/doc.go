// Package e2e holds the browser tests: each starts the real console binary on
// a database of its own and drives it with Chromium through playwright-go.
//
// They need what scripts/setup.sh installs (Chromium and the playwright
// driver); nothing is downloaded at test time. Run them with
//
//	go test -race ./e2e/
//
// PLAYWRIGHT_DRIVER_PATH overrides the driver directory and E2E_SCREENSHOTS
// the directory screenshots are written to (default e2e/screenshots; off
// for none, as CI runs them).
package e2e
