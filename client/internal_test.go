package client

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckSyntax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{"a.b.c", true},
		{"eyJ-_0.eyJ9.sig_-", true},
		{"", false},
		{"a.b", false},
		{"a.b.c.d", false},
		{".b.c", false},
		{"a..c", false},
		{"a.b.", false},
		{"a.b.c=", false},
		{"a.b.c d", false},
		{"a.b.c\n", false},
		{"a.b/.c", false},
		{strings.Repeat("a", MaxTokenLen-4) + ".b.c", true},
		{strings.Repeat("a", MaxTokenLen-3) + ".b.c", false},
	} {
		err := checkSyntax(tc.raw)
		if got := err == nil; got != tc.ok || (err != nil && !errors.Is(err, ErrInvalidToken)) {
			t.Errorf("checkSyntax(%.20q): got %v, want ok=%v", tc.raw, err, tc.ok)
		}
	}
}

func TestAnswerCacheBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newAnswerCache(20)
	key := func(i int) *[sha256.Size]byte { k := sha256.Sum256([]byte{byte(i)}); return &k }
	for i := range 20 {
		until := now.Add(time.Minute)
		if i < 5 {
			until = now.Add(time.Second) // expire first
		}
		c.put(key(i), answer{claims: &Claims{Subject: "s"}, until: until}, now)
	}
	later := now.Add(2 * time.Second)
	c.put(key(100), answer{claims: &Claims{Subject: "new"}, until: later.Add(time.Minute)}, later)
	if len(c.m) > 20 {
		t.Errorf("cache holds %d entries, want at most 20", len(c.m))
	}
	for i := range 5 {
		if _, ok := c.m[*key(i)]; ok {
			t.Errorf("expired entry %d kept while making room", i)
		}
	}
	if got, _, ok := c.get(key(100), later); !ok || got.Subject != "new" {
		t.Errorf("new entry: got %v, %v", got, ok)
	}
	c.put(key(101), answer{err: ErrInvalidToken, until: later}, later) // already stale: not kept
	if _, _, ok := c.get(key(101), later); ok {
		t.Error("an answer already past its until was kept")
	}
	for i := 200; i < 260; i++ { // full of live entries: room is made anyway
		c.put(key(i), answer{claims: &Claims{}, until: later.Add(time.Minute)}, later)
		if len(c.m) > 20 {
			t.Fatalf("cache holds %d entries, want at most 20", len(c.m))
		}
	}
}
