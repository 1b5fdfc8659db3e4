package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// maxStartAttempts bounds the retries on a port taken before the
	// server could bind it.
	maxStartAttempts = 3
	// maxLogSize is the size past which Start moves the server log aside.
	maxLogSize = 10 << 20
)

// errPortTaken marks a start that failed because another process bound the
// chosen port between freePort and the server's own bind.
var errPortTaken = errors.New("pgembed: another process took the server's port")

// start spawns the server and waits until it accepts connections. The port
// comes from a listener closed just before the server binds it, so another
// process can take it in between: then the server exits saying it could not
// bind, and start tries again on a new port.
func (c *Cluster) start(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := c.startOnce(ctx)
		if err == nil || attempt == maxStartAttempts || ctx.Err() != nil || !errors.Is(err, errPortTaken) {
			return err
		}
		c.cfg.Logger.Warn("postgres could not bind its port; retrying on another one",
			slog.Int("port", c.port), slog.Int("attempt", attempt))
	}
}

func (c *Cluster) startOnce(ctx context.Context) error {
	port, err := c.cfg.pickPort()
	if err != nil {
		return err
	}
	c.port = port
	logStart, err := c.spawn()
	if err != nil {
		return err
	}
	err = c.waitReady(ctx)
	if err == nil {
		return nil
	}
	_ = c.stop() // err already says why the server did not come up
	if out := c.logSince(logStart); strings.Contains(out, "could not bind") || strings.Contains(out, "Address already in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// spawn starts the postmaster as our child, in its own process group so a
// Ctrl-C in the terminal reaches only us: we stop the server after the
// console has drained. Pdeathsig asks the kernel to send it SIGINT (fast
// shutdown) if we die without stopping it, as under kill -9. spawn returns
// the offset in the log where this server's output begins.
func (c *Cluster) spawn() (int64, error) {
	logOut, logStart, err := c.openLog()
	if err != nil {
		return 0, err
	}
	defer logOut.Close()
	cmd := exec.Command(filepath.Join(c.cfg.BinDir, "postgres"), c.serverArgs()...)
	cmd.Stdout, cmd.Stderr = logOut, logOut
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.owner.credential(),
		Setpgid:    true,
		Pdeathsig:  syscall.SIGINT,
	}
	c.stopping.Store(false)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("pgembed: start postgres: %w", err)
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	go c.wait(cmd, c.exited)
	return logStart, nil
}

func (c *Cluster) serverArgs() []string {
	args := []string{
		"-D", c.cfg.DataDir,
		"-p", strconv.Itoa(c.port),
		"-k", c.socketDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_permissions=0700",
	}
	names := make([]string, 0, len(c.cfg.Settings))
	for name := range c.cfg.Settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "-c", name+"="+c.cfg.Settings[name])
	}
	return args
}

// wait reaps the server and records how it ended, for Err and Stop.
func (c *Cluster) wait(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	c.waitErr, c.ownExit = err, !c.stopping.Load()
	close(exited)
}

// openLog opens the server log for appending and returns its size, where the
// new output begins. A log grown past maxLogSize is first renamed to
// postgres.log.1, replacing the previous one. The file belongs to the server
// account like the rest of the data directory; since that account owns the
// directory, the file is opened without following symlinks and chowned
// through its descriptor.
func (c *Cluster) openLog() (*os.File, int64, error) {
	path := c.LogPath()
	if info, err := os.Lstat(path); err == nil && info.Size() > maxLogSize {
		if err := os.Rename(path, path+".1"); err != nil {
			return nil, 0, fmt.Errorf("pgembed: rotate server log: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("pgembed: open server log: %w", err)
	}
	info, err := f.Stat()
	if err == nil {
		err = c.owner.fchown(f)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("pgembed: prepare server log: %w", err)
	}
	return f, info.Size(), nil
}

// logSince returns what the server logged from offset on (at most 64 KiB).
func (c *Cluster) logSince(offset int64) string {
	f, err := os.Open(c.LogPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(f, offset, 64<<10), 64<<10))
	return string(b)
}

// Exited is closed when the server process has exited, whether Stop stopped
// it or it ended on its own; Err tells which.
func (c *Cluster) Exited() <-chan struct{} { return c.exited }

// Err reports a server that exited without Stop asking it to (a crash, or
// a shutdown by someone else): nil while the server runs and after Stop.
func (c *Cluster) Err() error {
	select {
	case <-c.exited:
	default:
		return nil
	}
	if !c.ownExit {
		return nil
	}
	status := "exit status 0"
	if c.waitErr != nil {
		status = c.waitErr.Error()
	}
	return fmt.Errorf("pgembed: postgres exited unexpectedly (%s): %s (log: %s)", status, c.logTail(), c.LogPath())
}

// Stop shuts the server down (fast shutdown, then immediate after
// StopTimeout) and releases the data directory. It is idempotent and safe to
// call from several goroutines. When the server had already exited on its
// own with a failure status, Stop returns that as its error.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = c.stop()
		if c.cmd != nil && c.stopErr == nil {
			// Said at shutdown, so that whoever pressed Ctrl-C sees the
			// server go down cleanly, not only the console.
			c.cfg.Logger.Info("embedded postgres stopped", slog.String("data_dir", c.cfg.DataDir))
		}
		if c.socketDir != "" {
			if err := os.RemoveAll(c.socketDir); err != nil {
				c.stopErr = errors.Join(c.stopErr, fmt.Errorf("pgembed: remove socket directory: %w", err))
			}
		}
		c.releaseLock()
	})
	return c.stopErr
}

// stop ends the server process, if it runs.
func (c *Cluster) stop() error {
	if c.cmd == nil {
		return nil
	}
	select {
	case <-c.exited:
		if c.ownExit && c.waitErr != nil {
			return c.Err()
		}
		return nil
	default:
	}
	c.stopping.Store(true)
	// SIGINT is PostgreSQL's fast shutdown: roll back sessions, checkpoint,
	// exit. SIGQUIT is immediate shutdown: crash recovery at the next start.
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
		return nil
	case <-time.After(c.cfg.StopTimeout):
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
		return fmt.Errorf("pgembed: server needed an immediate shutdown after %v", c.cfg.StopTimeout)
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("pgembed: server had to be killed")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgembed: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
