package pgembed

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// initSuffix names the sibling directory a new cluster is built in.
const initSuffix = ".init"

// initCluster creates a cluster in cfg.DataDir, which is missing or empty,
// without ever leaving a half-made one there: initdb runs in the sibling
// DataDir + ".init", which receives the password file and the log directory
// and is then renamed into place. A leftover .init directory is only ever an
// unfinished attempt that crashed, so it is removed first.
//
// Local (socket) connections are trusted because the socket directory is
// private to the server account; TCP on loopback needs the generated
// superuser password, kept in the data directory.
func initCluster(cfg Config, owner serverUser) error {
	work := cfg.DataDir + initSuffix
	if _, err := os.Lstat(work); err == nil {
		cfg.Logger.Warn("removing an unfinished cluster left by an interrupted initdb", slog.String("dir", work))
	}
	if err := os.RemoveAll(work); err != nil {
		return fmt.Errorf("pgembed: remove unfinished cluster %s: %w", work, err)
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("pgembed: create %s: %w", work, err)
	}
	err := buildCluster(cfg, owner, work)
	if err == nil {
		err = os.Rename(work, cfg.DataDir)
		if err != nil {
			err = fmt.Errorf("pgembed: move the new cluster into %s: %w", cfg.DataDir, err)
		}
	}
	if err != nil {
		_ = os.RemoveAll(work) // an unfinished cluster: ours, and useless
		return err
	}
	return syncDir(filepath.Dir(cfg.DataDir))
}

// buildCluster runs initdb in dir and completes the cluster there.
func buildCluster(cfg Config, owner serverUser, dir string) error {
	if err := owner.chown(dir); err != nil {
		return err
	}
	password, err := randomPassword()
	if err != nil {
		return err
	}
	cfg.Logger.Info("creating embedded postgres cluster", slog.String("data_dir", cfg.DataDir))
	if err := runInitdb(cfg, owner, dir, password); err != nil {
		return err
	}
	if cfg.afterInitdb != nil {
		if err := cfg.afterInitdb(dir); err != nil {
			return err
		}
	}
	stored := filepath.Join(dir, passwordFile)
	if err := writeFileSync(stored, []byte(password+"\n"), owner); err != nil {
		return fmt.Errorf("pgembed: store password: %w", err)
	}
	if err := ensureLogDir(dir, owner); err != nil {
		return err
	}
	return syncDir(dir)
}

// runInitdb runs initdb on dir. Its password file goes beside dir rather
// than in TMPDIR, which the server account may not be able to read.
func runInitdb(cfg Config, owner serverUser, dir, password string) error {
	pwFile, err := os.CreateTemp(filepath.Dir(dir), ".switchyard-pw-")
	if err != nil {
		return fmt.Errorf("pgembed: create password file: %w", err)
	}
	defer os.Remove(pwFile.Name())
	_, werr := pwFile.WriteString(password + "\n")
	cerr := pwFile.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("pgembed: write password file: %w", err)
	}
	if err := owner.chown(pwFile.Name()); err != nil {
		return err
	}
	args := []string{
		"-D", dir,
		"-U", Superuser,
		"--pwfile=" + pwFile.Name(),
		"--auth-local=trust",
		"--auth-host=scram-sha-256",
		"-E", "UTF8",
		"--locale=C",
	}
	if cfg.Throwaway {
		args = append(args, "--no-sync")
	}
	cmd := exec.Command(filepath.Join(cfg.BinDir, "initdb"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner.credential()}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgembed: initdb failed: %w: %s", err, lastLines(out.String(), 5))
	}
	return nil
}

// writeFileSync creates path (which must not exist: the directory belongs to
// the server account, so we follow no link planted there), writes data,
// gives it to the server account and flushes it to disk.
func writeFileSync(path string, data []byte, owner serverUser) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	oerr := owner.fchown(f)
	serr := f.Sync()
	return errors.Join(werr, oerr, serr, f.Close())
}

// syncDir flushes a directory's entries (a rename, a new file) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("pgembed: open %s to sync it: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) { // a file system that cannot sync directories
		return fmt.Errorf("pgembed: sync %s: %w", dir, err)
	}
	return nil
}
