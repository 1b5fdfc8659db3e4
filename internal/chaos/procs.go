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

// procs runs console processes of one role (`console dispatch`, or
// `console serve`) and restarts them on demand. Safe for concurrent use.
type procs struct {
	binary  string
	env     []string
	logDir  string
	role    string     // the subcommand: "dispatch" or "serve"
	slotEnv [][]string // per slot, added to env; nil: none

	mu       sync.Mutex
	running  []*proc // by slot
	starts   int
	exits    int             // processes that ended on their own, restarted
	pace     []time.Duration // by slot: the wait before restarting an exited process
	stopping bool            // set by stopAll: no more restarts
}

// proc is one started process; done is closed once it has exited.
type proc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	started time.Time
}

func newProcs(binary, logDir string, env []string, n int) *procs {
	return &procs{binary: binary, env: env, logDir: logDir, role: "dispatch", running: make([]*proc, n)}
}

// start starts slot's process, logging to its own file.
func (p *procs) start(slot int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return nil
	}
	p.starts++
	log, err := os.Create(filepath.Join(p.logDir, fmt.Sprintf("%s-%d-%d.log", p.role, slot, p.starts)))
	if err != nil {
		return fmt.Errorf("%s %d: log file: %w", p.role, slot, err)
	}
	cmd := exec.Command(p.binary, p.role)
	cmd.Env = p.env
	if p.slotEnv != nil {
		cmd.Env = slices.Concat(p.env, p.slotEnv[slot])
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s %d: %w", p.role, slot, err)
	}
	pr := &proc{cmd: cmd, done: make(chan struct{}), started: time.Now()}
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
// own (the processes wait for a database they cannot reach at start,
// SWITCHYARD_DATABASE_WAIT=forever, so this is what is left: a crash, or
// a failure at start that waiting cannot cure). The wait before the restart doubles, up to
// maxRestartPace, while the slot's processes exit within
// quickExit of starting: on a loaded machine every start is a storm of
// new connections, and restarting at once makes the next one fail too.
func (p *procs) restartExited(slot int, pr *proc) {
	p.mu.Lock()
	again := !p.stopping && p.running[slot] == pr
	var wait time.Duration
	if again {
		p.exits++
		p.running[slot] = nil
		if p.pace == nil {
			p.pace = make([]time.Duration, len(p.running))
		}
		switch {
		case time.Since(pr.started) > quickExit || p.pace[slot] == 0:
			p.pace[slot] = minRestartPace
		default:
			p.pace[slot] = min(2*p.pace[slot], maxRestartPace)
		}
		wait = p.pace[slot]
	}
	p.mu.Unlock()
	if again {
		time.Sleep(wait) // not a wait for a signal: a restart's pace
		_ = p.start(slot)
	}
}

// The pace of restarts of processes that exited on their own.
const (
	minRestartPace = 500 * time.Millisecond
	maxRestartPace = 8 * time.Second
	quickExit      = 30 * time.Second
)

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
