package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
)

// waitLimit bounds a wait that must not hang; it is a deadline for a hung
// test, never a timing the test depends on.
const waitLimit = 10 * time.Second

// TestStoreClosed: every call after Close fails at once with
// token.ErrUnavailable wrapping errStoreClosed.
func TestStoreClosed(t *testing.T) {
	r := redistest.New(t)
	s, err := New(r.Client, Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Keys("svc", "svc", "1", time.Time{})
	if sess, err := s.Session(t.Context(), k); err != nil || token.SessionLive(k.Issued, sess) == nil {
		t.Fatalf("Session of a missing record: %+v, %v; want one SessionLive refuses", sess, err)
	}
	s.Close()
	// Every call after Close fails at once; none waits for a sender that is gone.
	for i := range 100 {
		ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
		_, err := s.Session(ctx, k)
		cancel()
		if !errors.Is(err, token.ErrUnavailable) || !errors.Is(err, errStoreClosed) {
			t.Fatalf("Session %d after Close: err = %v, want ErrUnavailable wrapping errStoreClosed", i, err)
		}
	}
}
