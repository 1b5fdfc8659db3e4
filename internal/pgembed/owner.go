package pgembed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverUser is the OS account the server runs as. PostgreSQL refuses to run
// as root, so a root process runs it as the "postgres" account.
type serverUser struct {
	name     string
	uid, gid uint32
	switched bool // true when the server runs as another account than ours
}

func currentServerUser() (serverUser, error) {
	if os.Geteuid() != 0 {
		return serverUser{
			name: strconv.Itoa(os.Geteuid()),
			uid:  uint32(os.Geteuid()),
			gid:  uint32(os.Getegid()),
		}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return serverUser{}, fmt.Errorf("pgembed: running as root, PostgreSQL must run as the \"postgres\" OS account, which does not exist (create it, or run as a normal user): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return serverUser{}, fmt.Errorf("pgembed: parse uid of postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return serverUser{}, fmt.Errorf("pgembed: parse gid of postgres: %w", err)
	}
	return serverUser{name: "postgres", uid: uint32(uid), gid: uint32(gid), switched: true}, nil
}

// credential returns the process credential to start server programs with,
// or nil when they run as ourselves.
func (u serverUser) credential() *syscall.Credential {
	if !u.switched {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid}
}

// chown gives path to the server account; a no-op when it is us.
func (u serverUser) chown(path string) error {
	if !u.switched {
		return nil
	}
	if err := os.Chown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("pgembed: give %s to the postgres account: %w", path, err)
	}
	return nil
}

// checkOwner fails when path is not owned by the server account: PostgreSQL
// would refuse it, and changing the owner of an existing directory is the
// operator's decision, not ours.
func (u serverUser) checkOwner(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("pgembed: stat %s: %w", path, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("pgembed: cannot read file ownership on this platform")
	}
	if st.Uid != u.uid {
		return fmt.Errorf("pgembed: data directory %s is owned by uid %d but the server runs as %s (uid %d); fix its owner (chown -R) or choose another --data directory; nothing was changed", path, st.Uid, u.name, u.uid)
	}
	return nil
}

// checkReachable fails when the server account cannot traverse every parent
// of dir: initdb would otherwise fail with a confusing permission error.
func (u serverUser) checkReachable(dir string) error {
	if !u.switched {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("pgembed: resolve %s: %w", dir, err)
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgembed: stat %s: %w", p, err)
		}
		if !u.canTraverse(info) {
			return fmt.Errorf("pgembed: the postgres account cannot reach %s because %s is not searchable by it (mode %v); allow it (chmod o+x %s) or choose a --data directory elsewhere", abs, p, info.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (u serverUser) canTraverse(info os.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := info.Mode().Perm()
	switch {
	case st.Uid == u.uid:
		return mode&0o100 != 0
	case st.Gid == u.gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

// socketDirFor returns the private directory for the server's unix socket.
// Its name derives from the data directory, so a start after kill -9 reuses
// the one the dead run left instead of leaving a new one behind each time,
// and it is short, because a socket path must stay under ~107 bytes. Since
// the name is predictable, an existing entry is used only if it is a real
// directory owned by the server account and closed to everyone else.
func socketDirFor(dataDir string, owner serverUser) (string, error) {
	sum := sha256.Sum256([]byte(dataDir))
	dir := filepath.Join(os.TempDir(), "switchyard-pg-"+hex.EncodeToString(sum[:6]))
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return dir, owner.chown(dir)
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("pgembed: create socket directory: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("pgembed: inspect socket directory: %w", err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || st.Uid != owner.uid || info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("pgembed: %s exists but is not a private directory of %s; remove it and retry", dir, owner.name)
	}
	return dir, nil
}

// MkdirTemp creates a new temporary directory in which a data directory can
// be created: the server account can traverse it even when we are root
// (os.MkdirTemp makes directories only their creator can enter). The caller
// removes it.
func MkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("pgembed: create temporary directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("pgembed: open temporary directory to the server account: %w", err)
	}
	return dir, nil
}
