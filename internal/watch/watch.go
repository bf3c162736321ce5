// Package watch tells when files change on disk, the way deployments change
// them, and reports a change once a burst of events is over.
//
// A file is watched through directories because the ways a deployment
// updates a file replace it rather than write it in place: an editor,
// `snowtoken client …` or `snowtoken keys rotate` writes a new file and
// renames it over the old one, and Kubernetes updates a mounted Secret or
// ConfigMap by swapping the `..data` symlink that every file of the volume
// points through. A watch on the file itself would follow the old inode and
// never hear of either. And a path is often a symlink to a file elsewhere,
// whose changes happen in the target's directory, not the link's.
//
// The life of a watch:
//
//	Files(paths)
//	  │  resolve each path, link by link: the names that matter are the
//	  │  path, every symlink met on the way (as it sits in its directory)
//	  │  and the file at the end; for a directory, also every entry in it.
//	  │  Watch the directory of each name.
//	  ▼
//	an event (create, write, remove, rename, chmod) ─── on another name of
//	  │  on a name that matters, or lost events         those directories:
//	  │                                                  ignored
//	  ▼
//	burst: wait until Debounce passes with no event that matters, but no
//	  │  longer than MaxWait after the burst's first event
//	  ▼
//	resolve every path again (a link may point elsewhere now), watch the
//	  │  new directories and drop the ones no longer needed
//	  ▼
//	send one change (merged with one not yet received), then back to waiting
//
// So that one update (a rename, a Secret swap: several events each) is
// reported once and a reader sees the files whole; a directory written
// without pause (logs, other configuration) neither delays nor triggers a
// report, and steady writes to a file that matters delay it by MaxWait at
// most. A change of mode or owner (chmod, chown) is a change too: it can
// make a file readable that was not. What changed is not said: the caller
// reads its files again and compares.
//
// A change made through a hard link in a directory that is not watched, in
// place, is not seen (inotify reports it to that directory alone).
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// DefaultDebounce is Options.Debounce's default.
	DefaultDebounce = 250 * time.Millisecond
	// DefaultMaxWait is Options.MaxWait's default.
	DefaultMaxWait = time.Second
)

// maxLinks bounds the symlinks followed in resolving one path, as Linux's
// 40 does (ELOOP).
const maxLinks = 40

// Options configures Files. Zero values mean the documented defaults; a
// negative one is an error of Files.
type Options struct {
	// Debounce is how long the names that matter must stay quiet after an
	// event before the change is reported. Zero means DefaultDebounce.
	Debounce time.Duration
	// MaxWait bounds the wait for quiet: a change is reported at most
	// MaxWait after the first event of its burst. Zero means
	// DefaultMaxWait.
	MaxWait time.Duration
	// Logger receives the watcher's errors (such as an overflowed event
	// queue, reported as a change since events were lost). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Files watches paths (files, or directories whose every entry is watched)
// until ctx ends, and sends on the channel it returns once after each burst
// of changes to any of them. A change reported while the last is not yet
// received is merged into it. It fails if a directory cannot be watched
// (such as at the inotify limit, fs.inotify.max_user_watches).
func Files(ctx context.Context, paths []string, opts Options) (<-chan struct{}, error) {
	if opts.Debounce < 0 || opts.MaxWait < 0 {
		return nil, fmt.Errorf("watch: Debounce %v, MaxWait %v: zero means the default, a negative is an error", opts.Debounce, opts.MaxWait)
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.MaxWait == 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &watcher{fs: fw, paths: paths, log: opts.Logger, watched: map[string]bool{}}
	if err := w.refresh(); err != nil {
		fw.Close()
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer fw.Close()
		debounce(ctx, fw.Events, fw.Errors, out, opts, w.matters, func() {
			if err := w.refresh(); err != nil {
				w.log.Warn("watching the configuration files: a directory cannot be watched; SIGHUP still reloads", "err", err)
			}
		})
	}()
	return out, nil
}

// watcher holds what Files watches: the directories, and the names in them
// that matter.
type watcher struct {
	fs      *fsnotify.Watcher
	paths   []string
	log     *slog.Logger
	set     names
	watched map[string]bool // directories
}

// matters reports whether an event on name is one on the watched files.
func (w *watcher) matters(name string) bool {
	return w.set.files[name] || w.set.trees[name] || w.set.trees[filepath.Dir(name)]
}

// refresh resolves the paths again, watches the directories they now need
// and stops watching those they no longer do. It returns the first
// directory that could not be watched, other than one that does not exist
// (yet: its parent is watched when a link points into it).
func (w *watcher) refresh() error {
	set := names{files: map[string]bool{}, trees: map[string]bool{}}
	for _, p := range w.paths {
		if err := set.add(p); err != nil {
			return err
		}
	}
	dirs := set.dirs()
	var first error
	for _, d := range dirs {
		if w.watched[d] {
			continue
		}
		if err := w.fs.Add(d); err != nil {
			if !errors.Is(err, fs.ErrNotExist) && first == nil {
				first = fmt.Errorf("watch %s: %w", d, err)
			}
			continue
		}
		w.watched[d] = true
	}
	for d := range w.watched {
		if !slices.Contains(dirs, d) {
			_ = w.fs.Remove(d) // fails if the directory is gone, and its watch with it
			delete(w.watched, d)
		}
	}
	w.set = set
	return first
}

// names are the absolute paths, each in its resolved directory, on which an
// event is a change: files, and trees (directories whose every entry
// matters).
type names struct {
	files, trees map[string]bool
}

// add adds path's names: path, each symlink on the way and the end, and if
// the end is a directory, it as a tree and the names of its entries.
func (n *names) add(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	hops := 0
	end := n.follow(abs, true, &hops)
	if fi, err := os.Stat(end); err == nil && fi.IsDir() {
		n.trees[end] = true
		entries, _ := os.ReadDir(end) // unreadable: the tree's events still count
		for _, e := range entries {
			hops = 0
			n.follow(filepath.Join(end, e.Name()), true, &hops)
		}
	}
	return nil
}

// follow returns path with every symlink in it resolved, and adds each
// symlink it meets to n.files, and the end too if end is set. An ancestor
// that is no symlink is not added: the files need not be under the
// watched directories' parents. A name that does not exist ends the path.
func (n *names) follow(path string, end bool, hops *int) string {
	dir, base := filepath.Split(path)
	if base == "" {
		return path // the root
	}
	dir = n.follow(filepath.Clean(dir), false, hops)
	p := filepath.Join(dir, base)
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 && *hops < maxLinks {
		if target, err := os.Readlink(p); err == nil {
			*hops++
			n.files[p] = true
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			return n.follow(filepath.Clean(target), end, hops)
		}
	}
	if end {
		n.files[p] = true
	}
	return p
}

// dirs are the directories to watch, sorted.
func (n *names) dirs() []string {
	var dirs []string
	for f := range n.files {
		dirs = append(dirs, filepath.Dir(f))
	}
	for t := range n.trees {
		dirs = append(dirs, t)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// debounce sends on out once a burst of events on names that matter (or of
// errors, which mean events were lost) is over: opts.Debounce after its
// last event, or opts.MaxWait after its first, whichever comes first. It
// calls refresh before each send, and runs until ctx ends or events closes.
func debounce(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, out chan<- struct{}, opts Options,
	matters func(name string) bool, refresh func()) {
	timer := time.NewTimer(opts.Debounce)
	timer.Stop()
	defer timer.Stop()
	var first time.Time // of the burst under way; zero: none
	burst := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		timer.Reset(min(opts.Debounce, opts.MaxWait-now.Sub(first)))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if matters(ev.Name) {
				burst()
			}
		case err, ok := <-errs:
			if !ok {
				return
			}
			opts.Logger.Warn("watching the configuration files: events lost; reading them again", "err", err)
			burst()
		case <-timer.C:
			first = time.Time{}
			refresh()
			select {
			case out <- struct{}{}:
			default: // one is waiting already
			}
		}
	}
}
