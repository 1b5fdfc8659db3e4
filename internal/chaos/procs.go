package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// procs runs the console processes of a run (the dispatchers) and restarts
// them on demand. Safe for concurrent use.
type procs struct {
	binary string
	env    []string
	logDir string

	mu       sync.Mutex
	running  []*proc // by slot
	starts   int
	exits    int  // processes that ended on their own, restarted
	stopping bool // set by stopAll: no more restarts
}

// proc is one started process; done is closed once it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func newProcs(binary, logDir string, env []string, n int) *procs {
	return &procs{binary: binary, env: env, logDir: logDir, running: make([]*proc, n)}
}

// start starts slot's dispatcher, logging to its own file.
func (p *procs) start(slot int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return nil
	}
	p.starts++
	log, err := os.Create(filepath.Join(p.logDir, fmt.Sprintf("dispatch-%d-%d.log", slot, p.starts)))
	if err != nil {
		return fmt.Errorf("dispatcher %d: log file: %w", slot, err)
	}
	cmd := exec.Command(p.binary, "dispatch")
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start dispatcher %d: %w", slot, err)
	}
	pr := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(pr.done)
		p.restartExited(slot, pr)
	}()
	p.running[slot] = pr
	return nil
}

// restartExited starts slot again if pr, still its process, ended on its
// own (a dispatcher gives up when PostgreSQL is gone too long).
func (p *procs) restartExited(slot int, pr *proc) {
	p.mu.Lock()
	again := !p.stopping && p.running[slot] == pr
	if again {
		p.exits++
		p.running[slot] = nil
	}
	p.mu.Unlock()
	if again {
		time.Sleep(500 * time.Millisecond) // not a wait for a signal: a restart's pace
		_ = p.start(slot)
	}
}

// signal sends sig to slot's dispatcher.
func (p *procs) signal(slot int, sig syscall.Signal) error {
	p.mu.Lock()
	pr := p.running[slot]
	p.mu.Unlock()
	if pr == nil {
		return fmt.Errorf("dispatcher %d is not running", slot)
	}
	return pr.cmd.Process.Signal(sig)
}

// kill9 kills slot's dispatcher with SIGKILL, waits for it, and starts a
// new one in its place.
func (p *procs) kill9(slot int) error {
	p.mu.Lock()
	pr := p.running[slot]
	p.mu.Unlock()
	if pr == nil {
		return fmt.Errorf("dispatcher %d is not running", slot)
	}
	p.mu.Lock()
	p.running[slot] = nil // ours to restart, not restartExited's
	p.mu.Unlock()
	_ = pr.cmd.Process.Kill()
	<-pr.done
	return p.start(slot)
}

// stopAll ends every dispatcher: SIGCONT (a stopped one must run to end),
// then SIGTERM, and waits until they have exited (SIGKILL after timeout).
func (p *procs) stopAll(timeout time.Duration) {
	p.mu.Lock()
	p.stopping = true
	running := slices.Clone(p.running)
	p.mu.Unlock()
	for _, pr := range running {
		if pr != nil {
			_ = pr.cmd.Process.Signal(syscall.SIGCONT)
			_ = pr.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(timeout)
	for _, pr := range running {
		if pr == nil {
			continue
		}
		select {
		case <-pr.done:
		case <-deadline:
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	}
}

// counts returns how many dispatcher processes were started in all, and
// how many ended on their own.
func (p *procs) counts() (starts, exits int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts, p.exits
}
