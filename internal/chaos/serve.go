package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"
)

// serveInstances is how many `console serve` processes a run has.
const serveInstances = 2

// startServes starts the run's `console serve` instances, each on its own
// loopback port and data directory, in demo sign-in mode (the live-view
// clients need no account; demo mode serves only on loopback), with no
// dispatcher workers of their own: the three dispatchers deliver, the
// instances serve the live views and receive the inbox's events. It
// returns them and their base URLs once each answers /readyz.
func startServes(ctx context.Context, binary, workDir string, env []string) (*procs, []string, error) {
	ps := newProcs(binary, workDir, env, serveInstances)
	ps.role = "serve"
	ps.slotEnv = make([][]string, serveInstances)
	urls := make([]string, serveInstances)
	for slot := range serveInstances {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		urls[slot] = "http://" + addr
		ps.slotEnv[slot] = []string{"SWITCHYARD_LISTEN=" + addr, "SWITCHYARD_DEMO=true", "SWITCHYARD_WORKERS=0",
			"SWITCHYARD_DATA=" + filepath.Join(workDir, fmt.Sprintf("serve-%d", slot))}
		if err := ps.start(slot); err != nil {
			ps.stopAll(10 * time.Second)
			return nil, nil, err
		}
	}
	for _, u := range urls {
		if err := waitReady(ctx, u); err != nil {
			ps.stopAll(10 * time.Second)
			return nil, nil, err
		}
	}
	return ps, urls, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls base's /readyz until it answers 200 (at most a minute).
func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(time.Minute)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("console serve at %s not ready within a minute (last: %v)", base, err)
		}
		if !pause(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}
