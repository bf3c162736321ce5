package jwk

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// CacheOptions configure a Cache. Zero values mean the defaults given; a
// negative one is an error of NewCache.
type CacheOptions struct {
	// Timeout bounds one fetch, whole (with discovery, both its requests).
	// Zero means 5 s.
	Timeout time.Duration
	// TTL is how long a fetched set is used before it is fetched again,
	// whatever its answer says. Zero means the max-age of the answer's
	// Cache-Control (MaxAge), at least MinRefresh and at most DefaultTTL,
	// or DefaultTTL if it gives none: the key server says how long its
	// keys keep.
	TTL time.Duration
	// MinRefresh is the least time between two fetches of one source,
	// whatever asks for them (a signature with an unknown kid, a failed
	// fetch): made-up kids cost at most one fetch per MinRefresh. Zero
	// means 10 s.
	MinRefresh time.Duration
	// MaxStale is how long past its TTL a set still serves while fetching
	// it again fails; then its source's signatures are refused (fail
	// closed). Zero means 1 h; Forever means as long as fetches fail.
	MaxStale time.Duration
	// Failed, if not nil, is told of each failed fetch, once (to log it):
	// the set already fetched may still serve.
	Failed func(err error)
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Forever is a MaxStale with no end: a set fetched once serves until a
// fetch replaces it.
const Forever time.Duration = math.MaxInt64

// Defaults of CacheOptions.
const (
	DefaultTimeout    = 5 * time.Second
	DefaultTTL        = 5 * time.Minute
	DefaultMinRefresh = 10 * time.Second
	DefaultMaxStale   = time.Hour
)

// FetchFunc fetches src's key set, and the max-age its answer gives (zero
// for none; see Get). Its errors are the caller's: they carry the kind the
// caller answers with.
type FetchFunc[S comparable] func(ctx context.Context, src S) (*Set, time.Duration, error)

// Cache holds key sets by source (a URL, or a richer description of where
// a set is fetched from), fetched by its FetchFunc. One source's life:
//
//	        fetch ok                      TTL (or max-age)
//	none ────────────▶ fresh ───────────────────────────▶ stale
//	  ▲                  ▲  serves                         │ serves while a fetch is
//	  │                  └──── fetch ok ◀─────────────────┤ under way; else fetches
//	  │                                                    │ at most once a MinRefresh
//	  └──── Forget                     TTL + MaxStale ◀────┘ then fails closed: the
//	                                                         last fetch's error
//
// A fetch runs in the goroutine that needed it, with no lock held, not cut
// short when that goroutine's context ends (others may wait for it); the
// other callers serve the set they have, or wait for the fetch when they
// have none or ask for a refresh.
type Cache[S comparable] struct {
	opts  CacheOptions
	fixed bool // opts.TTL was set: answers' max-age is not read
	fetch FetchFunc[S]
	mu    sync.Mutex
	sets  map[S]*entry
}

// entry is one source's set. mu guards the fields only, never a fetch.
type entry struct {
	mu       sync.Mutex
	set      *Set          // nil until a fetch succeeds
	fetched  time.Time     // when set was
	ttl      time.Duration // set's: TTL, or its answer's max-age
	tried    time.Time     // when the last fetch began, successful or not
	err      error         // the last fetch's error, nil if it succeeded
	inflight chan struct{} // closed when the fetch under way ends; nil if none
}

// NewCache returns an empty Cache that fetches with fetch.
func NewCache[S comparable](opts CacheOptions, fetch FetchFunc[S]) (*Cache[S], error) {
	fixed := false
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"Timeout", &opts.Timeout, DefaultTimeout}, {"TTL", &opts.TTL, DefaultTTL}, {"MinRefresh", &opts.MinRefresh, DefaultMinRefresh}, {"MaxStale", &opts.MaxStale, DefaultMaxStale}} {
		if d.name == "TTL" && *d.v > 0 {
			fixed = true
		}
		switch {
		case *d.v < 0:
			return nil, fmt.Errorf("%w: %s %v is negative: zero means %v", ErrOptions, d.name, *d.v, d.def)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Cache[S]{opts: opts, fixed: fixed, fetch: fetch, sets: make(map[S]*entry)}, nil
}

// Keys returns src's key set: the cached one while fresh, or while stale
// if a fetch is under way; else it fetches (see Refresh).
func (c *Cache[S]) Keys(ctx context.Context, src S) (*Set, error) {
	e := c.entry(src)
	now := c.opts.Now()
	e.mu.Lock()
	age := now.Sub(e.fetched)
	if e.set != nil && (age < e.ttl || e.inflight != nil && c.serves(e, now)) {
		s := e.set
		e.mu.Unlock()
		return s, nil
	}
	e.mu.Unlock()
	return c.refresh(ctx, e, src, now)
}

// Refresh fetches src's key set again, as for a signature whose kid the
// cached set does not hold, unless a fetch began less than MinRefresh ago
// (then it returns the cached set, or the last fetch's error) or is under
// way (then it waits for it).
func (c *Cache[S]) Refresh(ctx context.Context, src S) (*Set, error) {
	return c.refresh(ctx, c.entry(src), src, c.opts.Now())
}

// Err returns the error of src's last fetch: nil if it succeeded or none
// was made.
func (c *Cache[S]) Err(src S) error {
	e := c.entry(src)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Forget drops src's cached set, if any: the next use fetches it again. A
// fetch under way ends in the dropped entry, and serves only the callers
// that were waiting for it.
func (c *Cache[S]) Forget(src S) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sets, src)
}

// entry returns src's entry, made if new.
func (c *Cache[S]) entry(src S) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.sets[src]
	if !ok {
		e = &entry{}
		c.sets[src] = e
	}
	return e
}

// serves reports whether e's set may still serve at now: younger than its
// TTL plus MaxStale. e.mu is held.
func (c *Cache[S]) serves(e *entry, now time.Time) bool {
	age := now.Sub(e.fetched)
	return e.set != nil && (age < e.ttl || age-e.ttl < c.opts.MaxStale)
}

// refresh waits for the fetch of e's set under way, if any; else fetches
// it, unless one began less than MinRefresh ago. It returns what e then
// serves: its set while it may (serves), else the last fetch's error.
func (c *Cache[S]) refresh(ctx context.Context, e *entry, src S, now time.Time) (*Set, error) {
	e.mu.Lock()
	switch {
	case e.inflight != nil:
		done := e.inflight
		e.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for the fetch under way: %w", ErrFetch, ctx.Err())
		}
		e.mu.Lock()
	case e.tried.IsZero() || now.Sub(e.tried) >= c.opts.MinRefresh:
		done := make(chan struct{})
		e.tried, e.inflight = now, done
		e.mu.Unlock()
		s, maxAge, err := c.fetchOne(ctx, src)
		if err != nil && c.opts.Failed != nil {
			c.opts.Failed(err)
		}
		e.mu.Lock()
		if err == nil {
			e.set, e.fetched, e.ttl = s, now, c.ttl(maxAge)
		}
		e.err, e.inflight = err, nil
		close(done)
	}
	defer e.mu.Unlock()
	if c.serves(e, now) {
		return e.set, nil
	}
	if e.err != nil {
		return nil, e.err
	}
	return nil, fmt.Errorf("%w: stale and not fetched again yet", ErrFetch)
}

// fetchOne runs one fetch of src, bounded by Timeout, and not ended by
// ctx's end: it serves every caller waiting for it.
func (c *Cache[S]) fetchOne(ctx context.Context, src S) (*Set, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Timeout)
	defer cancel()
	return c.fetch(ctx, src)
}

// ttl is how long a set whose answer gave maxAge stays fresh: TTL if it
// was set; else maxAge, at least MinRefresh and at most DefaultTTL, or
// DefaultTTL if the answer gave none.
func (c *Cache[S]) ttl(maxAge time.Duration) time.Duration {
	if c.fixed || maxAge <= 0 {
		return c.opts.TTL
	}
	return min(max(maxAge, c.opts.MinRefresh), DefaultTTL)
}
