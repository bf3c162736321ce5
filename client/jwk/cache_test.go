package jwk_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snowtoken/snowtoken/client/jwk"
)

// source is a key set a test changes, fetched by a counting FetchFunc.
type source struct {
	mu     sync.Mutex
	doc    string
	maxAge time.Duration
	err    error
	n      int
}

func (s *source) fetch(_ context.Context, _ string) (*jwk.Set, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.err != nil {
		return nil, 0, s.err
	}
	set, err := jwk.ParseSet([]byte(s.doc))
	return set, s.maxAge, err
}

func (s *source) set(doc string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc, s.err = doc, err
}

func (s *source) fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) add(d time.Duration)     { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_700_000_000, 0)} }
func hasKid(s *jwk.Set, kid string) bool { _, ok := s.ByID(kid); return ok }

var errDown = errors.New("the key server is down")

// TestCache: a hit within TTL, a fetch after it, refreshes for an unknown
// kid at most once per MinRefresh, a stale set serving until MaxStale when
// fetches fail, then failing closed.
func TestCache(t *testing.T) {
	k := newKeys(t)
	one, two := `{"keys":[`+k.ed+`]}`, `{"keys":[`+k.ed+`,`+k.ec+`]}`
	src := &source{doc: one}
	clk := newClock()
	c, err := jwk.NewCache(jwk.CacheOptions{TTL: time.Minute, MinRefresh: 10 * time.Second, MaxStale: time.Hour, Now: clk.now}, src.fetch)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	step := func(name string, get func() (*jwk.Set, error), wantKid string, wantErr error, wantFetches int) {
		t.Helper()
		s, err := get()
		switch {
		case wantErr != nil && !errors.Is(err, wantErr):
			t.Fatalf("%s: %v, want %v", name, err, wantErr)
		case wantErr == nil && (err != nil || !hasKid(s, wantKid)):
			t.Fatalf("%s: %v, %v; want kid %s", name, s, err, wantKid)
		case src.fetches() != wantFetches:
			t.Fatalf("%s: %d fetches, want %d", name, src.fetches(), wantFetches)
		}
	}
	keys := func() (*jwk.Set, error) { return c.Keys(ctx, "u") }
	refresh := func() (*jwk.Set, error) { return c.Refresh(ctx, "u") }
	step("first use fetches", keys, "ed", nil, 1)
	step("a hit", keys, "ed", nil, 1)
	src.set(two, nil)
	step("refresh within MinRefresh serves the cache", refresh, "ed", nil, 1)
	clk.add(10 * time.Second)
	step("refresh after MinRefresh fetches", refresh, "ec", nil, 2)
	for range 100 {
		step("made-up kids cost no more", refresh, "ec", nil, 2)
	}
	clk.add(time.Minute)
	src.set("", errDown)
	step("past TTL, a failed fetch serves the stale set", keys, "ec", nil, 3)
	if err := c.Err("u"); !errors.Is(err, errDown) {
		t.Fatalf("Err = %v", err)
	}
	step("a failed fetch is not retried within MinRefresh", keys, "ec", nil, 3)
	clk.add(time.Hour)
	step("past TTL + MaxStale: the fetch's error (fail closed)", keys, "", errDown, 4)
	src.set(one, nil)
	clk.add(10 * time.Second)
	step("a fetch that succeeds again serves", keys, "ed", nil, 5)
	c.Forget("u")
	step("Forget: the next use fetches", keys, "ed", nil, 6)
}

// TestCacheMaxAge: with no TTL set, an answer's max-age is the TTL,
// never below MinRefresh nor above DefaultTTL; a TTL set is used whatever
// the answer says. Forever keeps a set while fetches fail.
func TestCacheMaxAge(t *testing.T) {
	k := newKeys(t)
	for _, tc := range []struct {
		name        string
		ttl, maxAge time.Duration
		fresh, past time.Duration // still fresh after fresh; fetched again after past
	}{
		{"none: DefaultTTL", 0, 0, jwk.DefaultTTL - time.Second, jwk.DefaultTTL},
		{"max-age", 0, 30 * time.Second, 29 * time.Second, 30 * time.Second},
		{"below MinRefresh", 0, time.Second, 9 * time.Second, 10 * time.Second},
		{"no-cache", 0, time.Nanosecond, 9 * time.Second, 10 * time.Second},
		{"above DefaultTTL", 0, time.Hour, jwk.DefaultTTL - time.Second, jwk.DefaultTTL},
		{"TTL set, max-age shorter", time.Hour, 30 * time.Second, time.Hour - time.Second, time.Hour},
		{"TTL set, max-age longer", time.Minute, time.Hour, 59 * time.Second, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &source{doc: `{"keys":[` + k.ed + `]}`, maxAge: tc.maxAge}
			clk := newClock()
			c, _ := jwk.NewCache(jwk.CacheOptions{TTL: tc.ttl, MinRefresh: 10 * time.Second, MaxStale: jwk.Forever, Now: clk.now}, src.fetch)
			start := clk.t
			_, _ = c.Keys(t.Context(), "u")
			clk.t = start.Add(tc.fresh)
			_, _ = c.Keys(t.Context(), "u")
			if n := src.fetches(); n != 1 {
				t.Fatalf("after %v: %d fetches, want 1", tc.fresh, n)
			}
			clk.t = start.Add(tc.past)
			src.set("", errDown)
			if s, err := c.Keys(t.Context(), "u"); err != nil || !hasKid(s, "ed") || src.fetches() != 2 {
				t.Fatalf("after %v: %v, %v, %d fetches; want the stale set (Forever) after a second fetch", tc.past, s, err, src.fetches())
			}
			clk.add(1000 * time.Hour)
			if _, err := c.Keys(t.Context(), "u"); err != nil {
				t.Fatalf("Forever: %v", err)
			}
		})
	}
}

// TestCacheTimeout: a fetch that hangs ends at Timeout, even when the
// caller's own context has no deadline.
func TestCacheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := func(ctx context.Context, _ string) (*jwk.Set, time.Duration, error) {
			<-ctx.Done()
			return nil, 0, ctx.Err()
		}
		c, _ := jwk.NewCache(jwk.CacheOptions{Timeout: 3 * time.Second}, hang)
		start := time.Now()
		_, err := c.Keys(context.Background(), "u")
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Fatalf("Keys: %v after %v; want the deadline at 3s", err, time.Since(start))
		}
	})
}

// TestCacheOptions: zero is the default, a negative is an error.
func TestCacheOptions(t *testing.T) {
	for _, o := range []jwk.CacheOptions{{Timeout: -1}, {TTL: -1}, {MinRefresh: -time.Second}, {MaxStale: -1}} {
		if _, err := jwk.NewCache(o, (&source{}).fetch); !errors.Is(err, jwk.ErrOptions) {
			t.Errorf("NewCache(%+v) = %v, want ErrOptions", o, err)
		}
	}
	if _, err := jwk.NewCache(jwk.CacheOptions{}, (&source{}).fetch); err != nil {
		t.Errorf("NewCache(zero) = %v", err)
	}
}

// TestGet: the body of a 200, its max-age; a body larger than the bound
// and any other status are errors.
func TestGet(t *testing.T) {
	var body, cacheControl string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "" {
			t.Error("no Accept")
		}
		w.Header().Set("Cache-Control", cacheControl)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	get := func(maxBytes int64) ([]byte, time.Duration, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		return jwk.Get(srv.Client(), req, maxBytes)
	}
	body, cacheControl = `{"keys":[]}`, "public, max-age=300"
	if b, age, err := get(0); err != nil || string(b) != body || age != 300*time.Second {
		t.Fatalf("Get = %q, %v, %v", b, age, err)
	}
	body = strings.Repeat("x", 101)
	if _, _, err := get(100); err == nil || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Fatalf("Get of 101 bytes, bound 100: %v", err)
	}
	if _, _, err := get(101); err != nil {
		t.Fatalf("Get of 101 bytes, bound 101: %v", err)
	}
	status = http.StatusInternalServerError
	if _, _, err := get(0); err == nil || !strings.Contains(err.Error(), "answered 500") {
		t.Fatalf("Get of a 500: %v", err)
	}
}

// TestMaxAge: Cache-Control's max-age, no-store and no-cache.
func TestMaxAge(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"":                         0,
		"public, max-age=60":       time.Minute,
		"max-age=0":                time.Nanosecond,
		"no-cache":                 time.Nanosecond,
		"max-age=60, no-store":     time.Nanosecond,
		"max-age=x":                0,
		"max-age=-5":               0,
		`max-age="30"`:             30 * time.Second,
		"Max-Age=5, private":       5 * time.Second,
		"max-age=9999999999999999": 1 << 32 * time.Second,
	} {
		h := http.Header{}
		if cc != "" {
			h.Set("Cache-Control", cc)
		}
		if got := jwk.MaxAge(h); got != want {
			t.Errorf("MaxAge(%q) = %v, want %v", cc, got, want)
		}
	}
}
