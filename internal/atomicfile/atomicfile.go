// Package atomicfile writes files that a reader sees whole or not at all:
// the data goes to a temporary file in the same directory, mode 0600, which
// is synced before it takes the file's name. A crash or a full disk leaves
// the old file, never a part of the new one, and a process that re-reads the
// file as it changes (the issuer's clients file) never reads half of it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteTemp writes data to a new file, mode 0600, in dir, synced to disk,
// and returns its name. The name starts with prefix, which should start
// with a dot so that the file is hidden while it exists. The caller gives
// it its final name (os.Rename, os.Link) or removes it.
func WriteTemp(dir, prefix string, data []byte) (string, error) {
	tmp, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return "", err
	}
	err = tmp.Chmod(0o600)
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

// Replace makes path hold data, mode 0600, replacing the file there if any:
// WriteTemp, then rename(2), then a sync of the directory so that the new
// name survives a crash. If path is a symbolic link, the file it points to
// is replaced, not the link.
func Replace(path string, data []byte) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	dir := filepath.Dir(path)
	tmp, err := WriteTemp(dir, "."+filepath.Base(path)+".", data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
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
