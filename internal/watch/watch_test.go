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

	"github.com/snowtoken/snowtoken/internal/watch/watchtest"
)

// TestDebounce feeds events by hand on synctest's clock: a burst is one
// change, reported Debounce after its last event, or MaxWait after its
// first when the events do not stop; events on names that do not matter
// neither report nor delay one; a chmod is a change; so is an error.
func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d, maxWait = time.Second, 4 * time.Second
		events, errs := make(chan fsnotify.Event), make(chan error)
		out := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(t.Context())
		refreshes := 0
		go debounce(ctx, events, errs, out, Options{Debounce: d, MaxWait: maxWait, Logger: slog.New(slog.DiscardHandler)},
			func(name string) bool { return name == "/etc/snowtoken/clients.json" },
			func() { refreshes++ })
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
		event := func(name string, op fsnotify.Op) { events <- fsnotify.Event{Name: "/etc/snowtoken/" + name, Op: op} }

		for range 5 { // a burst: an event every half Debounce
			event("clients.json", fsnotify.Create)
			time.Sleep(d / 2)
		}
		if n := changes(); n != 0 {
			t.Fatalf("%d changes reported during a burst, want none yet", n)
		}
		time.Sleep(d / 2)
		if n := changes(); n != 1 {
			t.Fatalf("%d changes reported Debounce after the burst, want 1", n)
		}
		if refreshes != 1 {
			t.Errorf("%d refreshes before one change, want 1", refreshes)
		}

		// Another file of the directory written without pause: no change,
		// and one to clients.json is reported Debounce later all the same.
		busy, stopBusy := context.WithCancel(ctx)
		go func() {
			for busy.Err() == nil {
				event("app.log", fsnotify.Write)
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(3 * maxWait)
		if n := changes(); n != 0 {
			t.Errorf("%d changes reported for writes to another file, want none", n)
		}
		event("clients.json", fsnotify.Rename)
		time.Sleep(d)
		if n := changes(); n != 1 {
			t.Errorf("%d changes reported Debounce after clients.json changed in a busy directory, want 1", n)
		}
		stopBusy()

		// clients.json itself written every 20 ms: reported MaxWait after
		// the first event, and again MaxWait later while it goes on.
		steady, stopSteady := context.WithCancel(ctx)
		go func() {
			for steady.Err() == nil {
				event("clients.json", fsnotify.Write)
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(maxWait - time.Millisecond)
		if n := changes(); n != 0 {
			t.Errorf("%d changes reported before MaxWait of steady writes, want none", n)
		}
		time.Sleep(time.Millisecond)
		if n := changes(); n != 1 {
			t.Errorf("%d changes reported MaxWait after the first of steady writes, want 1", n)
		}
		time.Sleep(maxWait)
		if n := changes(); n != 1 {
			t.Errorf("%d changes reported another MaxWait on, want 1", n)
		}
		stopSteady()
		time.Sleep(d)
		changes()

		event("clients.json", fsnotify.Chmod) // chmod 0644, chown: may make it readable
		time.Sleep(d)
		if n := changes(); n != 1 {
			t.Errorf("%d changes reported for a chmod, want 1", n)
		}

		errs <- errors.New("queue overflow")
		time.Sleep(d)
		if n := changes(); n != 1 {
			t.Errorf("%d changes reported after an error, want 1", n)
		}
		cancel()
	})
}

// TestFilesLayouts watches a clients file in each layout a deployment uses,
// changes it as that deployment does, and waits for the change to be
// reported. The wait is a deadline for a change never reported, not a
// timing; after each change the watch is left to settle (quiet for longer
// than MaxWait), so that the next change is not one left over.
func TestFilesLayouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup lays the files out and returns the path to watch and the
		// changes to make, each to be reported.
		setup func(t *testing.T) (string, []func())
	}{
		{"plain file", func(t *testing.T) (string, []func()) {
			path := filepath.Join(t.TempDir(), "clients.json")
			write(t, path, "v1")
			return path, []func(){
				func() { replace(t, path, "v2") },
				func() { write(t, path, "v3") }, // in place
			}
		}},
		{"symlink to a file in another directory", func(t *testing.T) (string, []func()) {
			target := filepath.Join(t.TempDir(), "clients.json")
			write(t, target, "v1")
			link := filepath.Join(t.TempDir(), "clients.json")
			symlink(t, target, link)
			moved := filepath.Join(t.TempDir(), "clients.json")
			write(t, moved, "moved")
			return link, []func(){
				func() { replace(t, target, "v2") }, // as `snowtoken client disable` writes it
				func() { // the link points elsewhere now …
					tmp := link + ".tmp"
					symlink(t, moved, tmp)
					rename(t, tmp, link)
				},
				func() { replace(t, moved, "moved v2") }, // … and that file is watched
			}
		}},
		{"symlink to a directory", func(t *testing.T) (string, []func()) {
			realDir := t.TempDir()
			write(t, filepath.Join(realDir, "clients.json"), "v1")
			linkDir := filepath.Join(t.TempDir(), "conf")
			symlink(t, realDir, linkDir)
			return filepath.Join(linkDir, "clients.json"), []func(){
				func() { replace(t, filepath.Join(realDir, "clients.json"), "v2") },
			}
		}},
		{"kubernetes ..data swap", func(t *testing.T) (string, []func()) {
			dir := t.TempDir()
			watchtest.KubeletWrite(t, dir, "clients.json", []byte("v1"))
			return filepath.Join(dir, "clients.json"), []func(){
				func() { watchtest.KubeletWrite(t, dir, "clients.json", []byte("v2")) },
				func() { watchtest.KubeletWrite(t, dir, "clients.json", []byte("v3")) },
			}
		}},
		{"directory written every 20 ms", func(t *testing.T) (string, []func()) {
			dir := t.TempDir()
			path := filepath.Join(dir, "clients.json")
			write(t, path, "v1")
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ctx.Err() == nil; i++ {
					_ = os.WriteFile(filepath.Join(dir, "app.log"), []byte{byte(i)}, 0o600)
					time.Sleep(20 * time.Millisecond)
				}
			}()
			t.Cleanup(func() { stop(); <-done })
			return path, []func(){func() { replace(t, path, "v2") }}
		}},
		{"chmod", func(t *testing.T) (string, []func()) {
			path := filepath.Join(t.TempDir(), "clients.json")
			write(t, path, "v1")
			return path, []func(){func() {
				if err := os.Chmod(path, 0o640); err != nil {
					t.Fatal(err)
				}
			}}
		}},
		{"keys directory", func(t *testing.T) (string, []func()) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "keys.json"), "{}")
			return dir, []func(){
				func() { write(t, filepath.Join(dir, "key-2.pem"), "new key") },
				func() { replace(t, filepath.Join(dir, "keys.json"), `{"keys":[]}`) },
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, steps := tc.setup(t)
			// Debounce is more than the busy directory's 20 ms between writes.
			opts := Options{Debounce: 50 * time.Millisecond, MaxWait: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
			changes, err := Files(t.Context(), []string{path}, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range steps {
				step()
				select {
				case <-changes:
				case <-time.After(10 * time.Second):
					t.Fatalf("change %d: none reported", i+1)
				}
				for settled := false; !settled; {
					select {
					case <-changes:
					case <-time.After(2 * opts.MaxWait):
						settled = true
					}
				}
			}
		})
	}
}

func write(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// replace writes path as editors and the CLI do: a new file renamed over it.
func replace(tb testing.TB, path, data string) {
	tb.Helper()
	write(tb, path+".tmp", data)
	rename(tb, path+".tmp", path)
}

func rename(tb testing.TB, from, to string) {
	tb.Helper()
	if err := os.Rename(from, to); err != nil {
		tb.Fatal(err)
	}
}

func symlink(tb testing.TB, target, link string) {
	tb.Helper()
	if err := os.Symlink(target, link); err != nil {
		tb.Fatal(err)
	}
}

// TestFilesNegativeOptions: a negative Debounce or MaxWait is an error,
// not a default.
func TestFilesNegativeOptions(t *testing.T) {
	for _, o := range []Options{{Debounce: -time.Second}, {MaxWait: -1}} {
		if _, err := Files(t.Context(), []string{t.TempDir()}, o); err == nil {
			t.Errorf("Files(%+v): no error", o)
		}
	}
}
