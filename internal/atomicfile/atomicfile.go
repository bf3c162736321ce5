// Package atomicfile writes files that a reader sees whole or not at all,
// and serialises the programs that edit them.
//
// The data goes to a temporary file in the same directory, which is given
// the owner, group and mode of the file it replaces (mode 0600 and the
// writer's owner for a new file), synced, and then takes the file's name.
// A crash or a full disk leaves the old file, never a part of the new one;
// a process that re-reads the file as it changes (the issuer's clients
// file) never reads half of it; and whoever could read the file before
// (the user the issuer runs as) still can. When the writer cannot give the
// file its owner and group back (it is neither root nor the owner), nothing
// is written: ErrOwner. Extended attributes (ACLs, SELinux labels) are not
// copied.
//
// Lock serialises read-edit-write cycles between processes with flock(2) on
// a lock file beside the file (see Lock).
package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultLockWait is how long Lock waits for another editor when ctx has
// no deadline.
const DefaultLockWait = 10 * time.Second

var (
	// ErrOwner: the file's owner and group cannot be kept, as the writer
	// is neither root nor the file's owner (or not in its group).
	ErrOwner = errors.New("cannot keep the file's owner and group")
	// ErrLocked: another process held the lock for as long as Lock waited.
	ErrLocked = errors.New("another process is editing the file")
)

// Attr is the owner, group and mode of a file.
type Attr struct {
	UID, GID int
	Mode     fs.FileMode // permission bits only
}

func (a Attr) String() string { return fmt.Sprintf("%d:%d %04o", a.UID, a.GID, uint32(a.Mode)) }

// Stat returns the owner, group and mode of the file path (following links).
func Stat(path string) (Attr, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Attr{}, err
	}
	return attrOf(fi), nil
}

func attrOf(fi fs.FileInfo) Attr {
	a := Attr{UID: -1, GID: -1, Mode: fi.Mode().Perm()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.UID, a.GID = int(st.Uid), int(st.Gid)
	}
	return a
}

// WriteTemp writes data to a new file, mode 0600, in dir, synced to disk,
// and returns its name. The name starts with prefix, which should start
// with a dot so that the file is hidden while it exists. The caller gives
// it its final name (os.Rename, os.Link) or removes it.
func WriteTemp(dir, prefix string, data []byte) (string, error) {
	return writeTemp(dir, prefix, data, nil)
}

// writeTemp is WriteTemp giving the file attr (owner and group first, then
// the mode, as a chown may clear mode bits), or mode 0600 if attr is nil.
func writeTemp(dir, prefix string, data []byte, attr *Attr) (string, error) {
	tmp, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return "", err
	}
	err = tmp.Chmod(0o600)
	if err == nil && attr != nil {
		err = chown(tmp, *attr)
		if err == nil {
			err = tmp.Chmod(attr.Mode)
		}
	}
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// chown gives f attr's owner and group, unless it has them already.
func chown(f *os.File, attr Attr) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if have := attrOf(fi); have.UID == attr.UID && have.GID == attr.GID {
		return nil
	}
	if err := f.Chown(attr.UID, attr.GID); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w %d:%d: running as uid %d, which may not give a file that owner and group; "+
				"run as root, or as the file's owner and a member of its group: %w", ErrOwner, attr.UID, attr.GID, os.Geteuid(), err)
		}
		return err
	}
	return nil
}

// Replace makes path hold data, replacing the file there if any, with that
// file's owner, group and mode (a new file: the writer's, mode 0600):
// ReplaceLike(path, data, path).
func Replace(path string, data []byte) error {
	return ReplaceLike(path, data, path)
}

// ReplaceLike makes path hold data, replacing the file there if any, with
// the owner, group and mode of the file like, or the writer's and mode 0600
// if like does not exist: a temporary file, then rename(2), then a sync of
// the directory so that the new name survives a crash. If path is a
// symbolic link, the file it points to is replaced, not the link. Nothing
// is written if the owner cannot be kept (ErrOwner).
func ReplaceLike(path string, data []byte, like string) error {
	return replaceLike(path, data, like, fs.ModePerm)
}

// SecretMode bounds the mode ReplaceSecretLike gives a file: read and write
// for its owner, read for its group, nothing for others.
const SecretMode fs.FileMode = 0o640

// ReplaceSecretLike is ReplaceLike for a file that holds a secret (a
// private key): the owner and group of like, and its mode less whatever
// SecretMode does not allow, so that a world-readable like (a manifest that
// holds nothing secret) never makes a world-readable secret.
func ReplaceSecretLike(path string, data []byte, like string) error {
	return replaceLike(path, data, like, SecretMode)
}

// replaceLike is ReplaceLike with like's mode bounded by mask.
func replaceLike(path string, data []byte, like string, mask fs.FileMode) error {
	var attr *Attr
	switch a, err := Stat(like); {
	case err == nil:
		a.Mode &= mask
		attr = &a
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	path = target(path)
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, "."+filepath.Base(path)+".", data, attr)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// target is the file path names: the file a symbolic link points to, or
// path itself.
func target(path string) string {
	if t, err := filepath.EvalSymlinks(path); err == nil {
		return t
	}
	return path
}

// syncDir syncs a directory, so that a rename in it is on disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// LockPath is the lock file of path: ".NAME.lock" beside the file path
// names (the target of a link, so that editors reaching the file by
// different paths share one lock).
func LockPath(path string) string {
	path = target(path)
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock")
}

// Lock takes an exclusive flock(2) on path's lock file (LockPath), creating
// it if need be (with path's owner, group and mode where it can, so that
// whoever may edit the file may lock it; a link there is not followed), and
// returns the function that releases it (once; more calls do nothing). It
// waits while another process holds it, until ctx ends or, if ctx has no
// deadline, DefaultLockWait has passed: then it returns ErrLocked. The lock
// is released when the process ends, however it ends.
//
// The lock file stays: removing it would let a waiter lock a file that the
// next editor no longer sees. It is opened read-only and never written,
// so after it is first made it causes no event for a watcher of the
// directory (package watch): its creation is one event, a reload that finds
// nothing changed.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultLockWait)
		defer cancel()
	}
	name, start := LockPath(path), time.Now()
	f, err := os.OpenFile(name, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	} else if a, serr := Stat(path); err == nil && serr == nil {
		// Best effort: whoever may edit the file may lock it too.
		chown(f, a)
		f.Chmod(a.Mode)
	}
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return sync.OnceFunc(func() { f.Close() }), nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w: %s stayed locked for %v (%v); if no other edit is under way, a stuck process holds it",
				ErrLocked, name, time.Since(start).Round(time.Millisecond), context.Cause(ctx))
		case <-tick.C:
		}
	}
}
