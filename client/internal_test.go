package client

import (
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCheckSyntax covers what checkSyntax adds to jwtpolicy.CheckSyntax
// (whose own test has the table of shapes and bytes): the length bound, the
// opaque report, and ErrInvalidToken.
func TestCheckSyntax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw    string
		ok     bool
		opaque bool
	}{
		{"a.b.c", true, false},
		{strings.Repeat("a", MaxTokenLen-4) + ".b.c", true, false},
		{strings.Repeat("a", MaxTokenLen-3) + ".b.c", false, false},
		{"st_" + strings.Repeat("A", 32), true, true},
		{"st_" + strings.Repeat("A", 31), false, false},
		{"a.b.c\n", false, false},
		{"a.b\r\n.c", false, false},
	} {
		opaque, err := checkSyntax(tc.raw)
		if got := err == nil; got != tc.ok || (err != nil && !errors.Is(err, ErrInvalidToken)) {
			t.Errorf("checkSyntax(%.20q): got %v, want ok=%v", tc.raw, err, tc.ok)
		}
		if opaque != tc.opaque {
			t.Errorf("checkSyntax(%.20q): opaque %t, want %t", tc.raw, opaque, tc.opaque)
		}
	}
}

func TestAnswerCacheBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newAnswerCache(20)
	key := func(i int) *[sha256.Size]byte { k := sha256.Sum256([]byte{byte(i), byte(i >> 8)}); return &k }
	c.put(key(1), answer{claims: &Claims{Subject: "s"}, until: now.Add(time.Second)}, now)
	later := now.Add(2 * time.Second)
	if _, _, ok := c.get(key(1), later); ok {
		t.Error("an answer past its until was returned")
	}
	c.put(key(100), answer{claims: &Claims{Subject: "new"}, until: later.Add(time.Minute)}, later)
	if got, _, ok := c.get(key(100), later); !ok || got.Subject != "new" {
		t.Errorf("new entry: got %v, %v", got, ok)
	}
	c.put(key(101), answer{err: ErrInvalidToken, until: later}, later) // already stale: not kept
	if _, _, ok := c.get(key(101), later); ok {
		t.Error("an answer already past its until was kept")
	}
	live := answer{claims: &Claims{}, until: later.Add(time.Minute)}
	for i := 200; i < 2000; i++ { // full of live entries: room is made anyway
		c.put(key(i), live, later)
	}
	if n := c.len(); n != 20 {
		t.Fatalf("cache holds %d entries, want 20", n)
	}
	for i, want := range map[int]bool{100: false, 200: false, 1979: false, 1980: true, 1999: true} {
		if _, _, ok := c.get(key(i), later); ok != want {
			t.Errorf("answer %d of 200 to 1999 in 20 places: cached %v, want %v (the oldest go first)", i, ok, want)
		}
	}
	// An answer put again moves to the newest place: put first, again after
	// 10 others and followed by 15 more, it is among the last 20 put.
	for i := 3000; i <= 3025; i++ {
		c.put(key(i), live, later)
		if i == 3010 {
			c.put(key(3000), live, later)
		}
	}
	if _, _, ok := c.get(key(3000), later); !ok {
		t.Error("an answer put again was evicted at the place of its first put")
	}
	if n := c.len(); n != 20 {
		t.Fatalf("cache holds %d entries, want 20", n)
	}
}

// TestAnswerCacheConcurrent runs puts and gets from many goroutines, for
// the race detector, and checks the bound holds under them.
func TestAnswerCacheConcurrent(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newAnswerCache(64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := sha256.Sum256([]byte{byte(g), byte(i), byte(i >> 8)})
				c.put(&k, answer{claims: &Claims{Subject: "s"}, until: now.Add(time.Minute)}, now)
				if got, _, ok := c.get(&k, now); ok && got.Subject != "s" {
					t.Errorf("got %+v", got)
				}
			}
		})
	}
	wg.Wait()
	if n := c.len(); n != 64 {
		t.Errorf("cache holds %d entries, want 64", n)
	}
}

// BenchmarkAnswerCache measures a put of a new answer and a get of a cached
// one, with the cache at the default size empty and full: a full
// cache must cost about what an empty one does.
func BenchmarkAnswerCache(b *testing.B) {
	now := time.Now()
	a := answer{claims: &Claims{Subject: "s"}, until: now.Add(time.Hour)}
	key := func(n uint64) [sha256.Size]byte {
		return sha256.Sum256([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), byte(n >> 32)})
	}
	for _, fill := range []struct {
		name string
		n    int
	}{{"empty", 0}, {"full", DefaultCacheSize}} {
		c := newAnswerCache(DefaultCacheSize)
		for i := range fill.n {
			k := key(uint64(i))
			c.put(&k, a, now)
		}
		b.Run("put/"+fill.name, func(b *testing.B) {
			var i uint64 = 1 << 32
			for b.Loop() {
				i++
				k := key(i)
				c.put(&k, a, now)
			}
		})
		hot := key(1 << 36)
		c.put(&hot, a, now)
		b.Run("get/"+fill.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, ok := c.get(&hot, now); !ok {
					b.Fatal("a cached answer is gone")
				}
			}
		})
	}
}
