package atomicfile

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestReplace: the file holds the new data, keeps its mode, and nothing
// else is left in the directory; a new file is mode 0600.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	if err := Replace(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, "first")
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Replace(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	wantOnly(t, dir, "clients.json")
	wantAttr(t, path, "new", Attr{UID: os.Geteuid(), GID: os.Getegid(), Mode: 0o640})
}

// TestReplaceKeepsOwner: a file of another user, replaced by root, keeps
// its owner, group and mode, and that user (or a member of that group)
// still reads it: the issuer running as uid 12345 once could no longer
// read a clients file that root edited. ReplaceLike
// gives a new file the owner, group and mode of the file it names, and
// Lock its lock file.
func TestReplaceKeepsOwner(t *testing.T) {
	setpriv := needRoot(t)
	for _, tc := range []struct {
		name   string
		attr   Attr
		reader []string // setpriv's credentials of a user who must read it
	}{
		{"owner", Attr{UID: 12345, GID: 12345, Mode: 0o600}, []string{"--reuid", "12345", "--regid", "12345"}},
		{"group", Attr{UID: 0, GID: 12345, Mode: 0o640}, []string{"--reuid", "23456", "--regid", "12345"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := sharedDir(t)
			path := filepath.Join(dir, "clients.json")
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			setAttr(t, path, tc.attr)
			if err := Replace(path, []byte("new")); err != nil {
				t.Fatal(err)
			}
			wantAttr(t, path, "new", tc.attr)
			args := append(append(tc.reader, "--clear-groups", "cat"), path)
			if out, err := exec.Command(setpriv, args...).CombinedOutput(); err != nil || string(out) != "new" {
				t.Errorf("reading it as %v: %q, %v; want %q", tc.reader, out, err, "new")
			}

			key := filepath.Join(dir, "key.pem")
			if err := ReplaceLike(key, []byte("key"), path); err != nil {
				t.Fatal(err)
			}
			wantAttr(t, key, "key", tc.attr)

			unlock, err := Lock(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			unlock()
			if a, err := Stat(LockPath(path)); err != nil || a != tc.attr {
				t.Errorf("the lock file: %v (%v), want the file's %v, so that its readers may lock it", a, err, tc.attr)
			}
		})
	}
}

// TestLockSerialises: a second Lock waits while the first is held, fails
// with ErrLocked when its context ends first, and succeeds once the first
// is released; the lock file is shared by a link to the file and the file.
func TestLockSerialises(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	link := filepath.Join(t.TempDir(), "clients.json")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	unlock, err := Lock(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, link); !errors.Is(err, ErrLocked) {
		t.Errorf("Lock while another holds it = %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() {
		unlock2, err := Lock(t.Context(), link)
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("Lock once released = %v", err)
	}
	wantOnly(t, dir, ".clients.json.lock", "clients.json")
}

// TestLockMakesNoEvents: once the lock file exists, locking and unlocking
// make no event that a watcher of the directory sees (the issuer's
// watcher reloads on any event): the first event after many lock cycles
// is the one of a file written after them.
func TestLockMakesNoEvents(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	unlock, err := Lock(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		unlock, err := Lock(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	sentinel := filepath.Join(dir, "sentinel")
	if err := os.WriteFile(sentinel, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.Events:
		if ev.Name != sentinel {
			t.Errorf("first event %v, want the sentinel's: locking made an event", ev)
		}
	case err := <-w.Errors:
		t.Fatal(err)
	case <-time.After(10 * time.Second): // a deadline for a hung test only
		t.Fatal("no event for the sentinel")
	}
}

// needRoot skips the test unless it runs as root with setpriv(1), which
// it returns: it gives files to other users and reads them as those users.
func needRoot(tb testing.TB) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root, to give a file to another user (uid 12345)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		tb.Skip("needs setpriv (util-linux), to read a file as another user")
	}
	return setpriv
}

// sharedDir is a temporary directory that every user may enter.
func sharedDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "atomicfile-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// setAttr gives path attr.
func setAttr(tb testing.TB, path string, attr Attr) {
	tb.Helper()
	if err := os.Chown(path, attr.UID, attr.GID); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, attr.Mode); err != nil {
		tb.Fatal(err)
	}
}

// wantAttr checks a file's contents, owner, group and mode.
func wantAttr(tb testing.TB, path, want string, attr Attr) {
	tb.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		tb.Errorf("%s holds %q (%v), want %q", path, got, err, want)
	}
	if a, err := Stat(path); err != nil || a != attr {
		tb.Errorf("%s: %v (%v), want %v", path, a, err, attr)
	}
}

// TestReplaceThroughSymlink: a link is followed, not replaced: the file it
// points to gets the data, and the temporary file is made beside that file.
func TestReplaceThroughSymlink(t *testing.T) {
	dir, linkDir := t.TempDir(), t.TempDir()
	target := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(linkDir, "clients.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Replace(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer a link: %v, %v", fi, err)
	}
	wantFile(t, target, "new")
	wantOnly(t, dir, "clients.json")
}

// TestReplaceFailureLeavesNoTemp: when the rename fails (the path is a
// directory that is not empty), Replace says so, the directory is untouched
// and the temporary file is gone.
func TestReplaceFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "keep"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Replace(path, []byte("new")); err == nil {
		t.Fatal("Replace over a directory succeeded")
	}
	wantOnly(t, dir, "clients.json")
	wantFile(t, filepath.Join(path, "keep"), "old")
}

// wantFile checks a file's contents and that its mode is 0600.
func wantFile(tb testing.TB, path, want string) {
	tb.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		tb.Errorf("%s holds %q (%v), want %q", path, got, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		tb.Errorf("%s mode %v (%v), want 0600", path, fi.Mode().Perm(), err)
	}
}

// wantOnly checks that dir holds exactly the files names, in order: no
// temporary file left.
func wantOnly(tb testing.TB, dir string, names ...string) {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		tb.Errorf("%s holds %q, want only %q", dir, got, names)
	}
}
