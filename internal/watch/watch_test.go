package watch

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestDebounce feeds events by hand on synctest's clock: a burst is one
// change, reported Debounce after its last event; chmod alone is none; an
// error counts as a change.
func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Second
		events, errs := make(chan fsnotify.Event), make(chan error)
		out := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(t.Context())
		go debounce(ctx, events, errs, out, Options{Debounce: d, Logger: slog.New(slog.DiscardHandler)})
		changes := func() int {
			synctest.Wait()
			n := 0
			for {
				select {
				case <-out:
					n++
				default:
					return n
				}
			}
		}

		for range 5 { // a burst: an event every half Debounce
			events <- fsnotify.Event{Name: "clients.json", Op: fsnotify.Create}
			time.Sleep(d / 2)
		}
		if n := changes(); n != 0 {
			t.Fatalf("%d changes reported during a burst, want none yet", n)
		}
		time.Sleep(d / 2)
		if n := changes(); n != 1 {
			t.Fatalf("%d changes reported Debounce after the burst, want 1", n)
		}

		events <- fsnotify.Event{Name: "clients.json", Op: fsnotify.Chmod}
		time.Sleep(2 * d)
		if n := changes(); n != 0 {
			t.Errorf("%d changes reported for a chmod, want none", n)
		}

		errs <- errors.New("queue overflow")
		time.Sleep(d)
		if n := changes(); n != 1 {
			t.Errorf("%d changes reported after an error, want 1", n)
		}
		cancel()
	})
}

// TestDirsSeesReplacedFiles changes a watched directory the ways
// deployments do — write-and-rename, and Kubernetes's swap of a ..data
// symlink — and waits for each change to be reported.
func TestDirsSeesReplacedFiles(t *testing.T) {
	dir := t.TempDir()
	// The layout of a mounted Secret: clients.json -> ..data/clients.json,
	// ..data -> ..2026_11_23_1.
	v1 := filepath.Join(dir, "..2026_11_23_1")
	if err := os.Mkdir(v1, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(v1, "clients.json"), "v1")
	if err := os.Symlink("..2026_11_23_1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/clients.json", filepath.Join(dir, "clients.json")); err != nil {
		t.Fatal(err)
	}
	changes, err := Dirs(t.Context(), []string{dir}, Options{Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitChange := func(what string) {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(10 * time.Second): // a deadline for a hung test, not a timing
			t.Fatalf("no change reported after %s", what)
		}
	}

	t.Run("symlink swap", func(t *testing.T) {
		v2 := filepath.Join(dir, "..2026_11_23_2")
		if err := os.Mkdir(v2, 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(v2, "clients.json"), "v2")
		if err := os.Symlink("..2026_11_23_2", filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		waitChange("the ..data swap")
	})
	t.Run("write and rename", func(t *testing.T) {
		write(t, filepath.Join(dir, "keys.json.tmp"), "{}")
		if err := os.Rename(filepath.Join(dir, "keys.json.tmp"), filepath.Join(dir, "keys.json")); err != nil {
			t.Fatal(err)
		}
		waitChange("a rename over a file")
	})
}

func write(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		tb.Fatal(err)
	}
}
