// Package logsum keeps repeated failures from flooding the log. A Handler
// wraps another slog.Handler: the first record of a kind is logged at once;
// records of the same kind within the next Interval are counted, not logged;
// the first one after the Interval is logged with the count, as
//
//	{"level":"WARN","msg":"unavailable","err":"...","suppressed":4211}
//
// so that an outage writes one line per kind of failure per Interval instead
// of one per failed request. Two records are of the same kind when their
// level, message and "err" attribute match once every run of digits is read
// as one (ports, addresses and durations do not make failures distinct).
// Records below Options.Level pass unchanged.
//
// The count of the last Interval of a failure that stops is never logged:
// the summary rides on the next record of its kind. Whatever must be counted
// exactly belongs in a metric, counted before it is logged.
//
// Hand-written rather than github.com/samber/slog-sampling, whose threshold
// sampler with IncludeDroppedCount does nearly this: it brings five modules
// (slog-multi, slog-common, lo, gcache, hashmap) for some sixty lines, reads
// time.Now only, and moves its dropped count to the next window outside the
// compare-and-swap that opens it, so racing requests can misreport the count.
package logsum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultInterval = 10 * time.Second
	DefaultMaxKinds = 256
)

// ErrOptions is a negative Interval or MaxKinds, which New returns: zero
// means the default, and nothing means "none".
var ErrOptions = errors.New("logsum: invalid options")

// SuppressedKey is the attribute that carries how many records of the same
// kind were not logged since the last one that was.
const SuppressedKey = "suppressed"

// Options configures a Handler. The zero value is ready to use.
type Options struct {
	// Interval is how long a kind of record stays quiet after it is logged.
	// Zero means DefaultInterval.
	Interval time.Duration
	// Level is the lowest level summarised; records below it pass unchanged.
	// Nil means slog.LevelWarn.
	Level slog.Leveler
	// MaxKinds bounds the kinds remembered, so that failures with ever new
	// texts cannot grow memory: past it, kinds whose Interval has ended are
	// forgotten, and if none has, records of new kinds count as one kind.
	// Zero means DefaultMaxKinds.
	MaxKinds int
	// Now reads the clock. Nil means time.Now. Tests inject a fake clock.
	Now func() time.Time
}

// Handler summarises repeated records on their way to another handler. It is
// safe for concurrent use; the handlers WithAttrs and WithGroup return share
// its counts.
type Handler struct {
	next slog.Handler
	s    *state
}

// state is what a Handler and those derived from it share.
type state struct {
	opts  Options
	mu    sync.Mutex
	kinds map[string]*kind
}

// kind is the count of one kind of record.
type kind struct {
	logged     time.Time // when a record of the kind was last logged
	suppressed int64     // records not logged since
}

// overflowKind is the kind of every record of a new kind once MaxKinds are
// remembered and none can be forgotten.
const overflowKind = "\x00overflow"

// New returns a Handler that passes records to next, or ErrOptions.
func New(next slog.Handler, opts Options) (*Handler, error) {
	if opts.Interval < 0 || opts.MaxKinds < 0 {
		return nil, fmt.Errorf("%w: Interval %v and MaxKinds %d must not be negative", ErrOptions, opts.Interval, opts.MaxKinds)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Level == nil {
		opts.Level = slog.LevelWarn
	}
	if opts.MaxKinds == 0 {
		opts.MaxKinds = DefaultMaxKinds
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Handler{next: next, s: &state{opts: opts, kinds: map[string]*kind{}}}, nil
}

// Enabled reports whether the next handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle logs r, counts it instead, or logs it with the count of those not
// logged before it.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.s.opts.Level.Level() {
		return h.next.Handle(ctx, r)
	}
	suppressed, log := h.s.count(kindOf(r))
	if !log {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64(SuppressedKey, suppressed))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a Handler with attrs that shares h's counts.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), s: h.s}
}

// WithGroup returns a Handler with a group that shares h's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), s: h.s}
}

// count records one record of kind k now. It reports whether to log it, and
// how many of its kind were not logged since the last one that was.
func (s *state) count(k string) (suppressed int64, log bool) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.kinds[k]
	if c == nil {
		if len(s.kinds) >= s.opts.MaxKinds {
			s.forget(now)
		}
		if len(s.kinds) >= s.opts.MaxKinds {
			k = overflowKind
			c = s.kinds[k]
		}
	}
	if c == nil {
		s.kinds[k] = &kind{logged: now}
		return 0, true
	}
	if now.Sub(c.logged) < s.opts.Interval {
		c.suppressed++
		return 0, false
	}
	suppressed, c.logged, c.suppressed = c.suppressed, now, 0
	return suppressed, true
}

// forget drops the kinds whose Interval has ended. Their counts are lost to
// the log, not to metrics. The overflow kind is never dropped, so that the
// map holds at most MaxKinds+1 kinds.
func (s *state) forget(now time.Time) {
	for k, c := range s.kinds {
		if k != overflowKind && now.Sub(c.logged) >= s.opts.Interval {
			delete(s.kinds, k)
		}
	}
}

// kindOf is the kind of r: its level, message and "err" attribute, with every
// run of digits read as '#'.
func kindOf(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(0)
	writeDigitless(&b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" {
			return true
		}
		b.WriteByte(0)
		v := a.Value.Resolve()
		if err, ok := v.Any().(error); ok {
			writeDigitless(&b, err.Error())
		} else {
			writeDigitless(&b, v.String())
		}
		return false
	})
	return b.String()
}

// writeDigitless writes s to b with every run of digits as one '#'.
func writeDigitless(b *strings.Builder, s string) {
	digits := false
	for i := range len(s) {
		c := s[i]
		if '0' <= c && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
}
