package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplace: the file holds the new data, mode 0600 whatever it was
// before, and nothing else is left in the directory.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Replace(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	wantOnly(t, dir, "clients.json")
	wantFile(t, path, "new")
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

// wantOnly checks that dir holds exactly the file name: no temporary file left.
func wantOnly(tb testing.TB, dir, name string) {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != name {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		tb.Errorf("%s holds %q, want only %s", dir, names, name)
	}
}
