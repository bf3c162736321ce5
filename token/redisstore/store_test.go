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
	s := New(r.Client, Options{Prefix: r.Prefix})
	k := s.Keys("svc", "svc", "1", time.Time{})
	if err := s.Check(t.Context(), k); !errors.Is(err, token.ErrRevoked) {
		t.Fatalf("Check of a missing record: err = %v, want ErrRevoked", err)
	}
	s.Close()
	// Every call after Close fails at once; none waits for a sender that is gone.
	for i := range 100 {
		ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
		err := s.Check(ctx, k)
		cancel()
		if !errors.Is(err, token.ErrUnavailable) || !errors.Is(err, errStoreClosed) {
			t.Fatalf("Check %d after Close: err = %v, want ErrUnavailable wrapping errStoreClosed", i, err)
		}
	}
}
