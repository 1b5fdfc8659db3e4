package pgembed

import (
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

// chown gives path to the server account; a no-op when it is us. It never
// follows a symlink: everything it is used on was made by us.
func (u serverUser) chown(path string) error {
	if !u.switched {
		return nil
	}
	if err := os.Lchown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("pgembed: give %s to the postgres account: %w", path, err)
	}
	return nil
}

// fchown gives an open file to the server account; a no-op when it is us.
func (u serverUser) fchown(f *os.File) error {
	if !u.switched {
		return nil
	}
	if err := f.Chown(int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("pgembed: give %s to the postgres account: %w", f.Name(), err)
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
	blocked, mode, err := u.unreachableParent(dir)
	if err != nil || blocked == "" {
		return err
	}
	return fmt.Errorf("pgembed: the postgres account cannot reach %s because %s is not searchable by it (mode %v); allow it (chmod o+x %s) or choose a --data directory elsewhere", dir, blocked, mode, blocked)
}

// unreachableParent returns the first parent of dir, from the root down,
// that the server account cannot traverse, and its mode; "" when the
// account can reach dir. Parents that do not exist yet will be ours.
func (u serverUser) unreachableParent(dir string) (string, os.FileMode, error) {
	if !u.switched {
		return "", 0, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", 0, fmt.Errorf("pgembed: resolve %s: %w", dir, err)
	}
	var parents []string
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		parents = append(parents, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(parents) - 1; i >= 0; i-- {
		info, err := os.Stat(parents[i])
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, nil
		}
		if err != nil {
			return "", 0, fmt.Errorf("pgembed: stat %s: %w", parents[i], err)
		}
		if !u.canTraverse(info) {
			return parents[i], info.Mode().Perm(), nil
		}
	}
	return "", 0, nil
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
