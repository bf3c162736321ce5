// Package watch tells when files change on disk, the way deployments change
// them: it watches directories, not files, and reports a change once a
// burst of events is over.
//
// A file is watched through its directory because the ways a deployment
// updates a file replace it rather than write it in place: an editor or
// `snowtoken keys rotate` writes a new file and renames it over the old
// one, and Kubernetes updates a mounted Secret or ConfigMap by swapping the
// `..data` symlink that every file of the volume points through. A watch on
// the file itself would follow the old inode and never hear of either.
//
// A change is reported after Debounce without another event, so that one
// update (a rename, a Secret swap: several events each) is reported once,
// and a reader sees the files whole. What changed is not said: the caller
// reads its files again and compares.
package watch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is Options.Debounce's default.
const DefaultDebounce = 250 * time.Millisecond

// Options configures Dirs. Zero values mean the documented defaults.
type Options struct {
	// Debounce is how long the directories must stay quiet after an event
	// before the change is reported. Zero means DefaultDebounce.
	Debounce time.Duration
	// Logger receives the watcher's errors (such as an overflowed event
	// queue, reported as a change since events were lost). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Dirs watches dirs until ctx ends, and sends on the channel it returns once
// after each burst of changes in any of them. A change reported while the
// last is not yet received is merged into it.
func Dirs(ctx context.Context, dirs []string, opts Options) (<-chan struct{}, error) {
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
	}
	out := make(chan struct{}, 1)
	go func() {
		defer w.Close()
		debounce(ctx, w.Events, w.Errors, out, opts)
	}()
	return out, nil
}

// debounce sends on out opts.Debounce after the last of a burst of events
// or errors, until ctx ends or events closes. A change of mode alone
// (chmod) is no change.
func debounce(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, out chan<- struct{}, opts Options) {
	timer := time.NewTimer(opts.Debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			timer.Reset(opts.Debounce)
		case err, ok := <-errs:
			if !ok {
				return
			}
			opts.Logger.Warn("watching the configuration files: events lost; reading them again", "err", err)
			timer.Reset(opts.Debounce)
		case <-timer.C:
			select {
			case out <- struct{}{}:
			default: // one is waiting already
			}
		}
	}
}
