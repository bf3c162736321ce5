package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
)

// waitLimit bounds a wait that must not hang; it is a deadline for a hung
// test, never a timing the test depends on.
const waitLimit = 10 * time.Second

// forPaths runs test on a new Store of its own on a single Redis's paths
// and on a Cluster's (Options.ClusterPaths).
func forPaths(t *testing.T, test func(t *testing.T, r *redistest.Redis, s *Store)) {
	for _, cluster := range []bool{false, true} {
		t.Run("cluster paths "+strconv.FormatBool(cluster), func(t *testing.T) {
			r := redistest.New(t)
			s, err := New(r.Client, Options{Prefix: r.Prefix, ClusterPaths: cluster})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			test(t, r, s)
		})
	}
}

// TestStoreClosed: every call after Close fails at once with
// token.ErrUnavailable wrapping errStoreClosed.
func TestStoreClosed(t *testing.T) {
	r := redistest.New(t)
	s, err := New(r.Client, Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Handle(token.SessionRef{JTI: "1", Subject: "svc", Client: "svc"})
	if sess, err := s.Session(t.Context(), k); err != nil || token.SessionLive(0, sess) == nil {
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

// TestForeignHandle: Session reads nothing on a handle that the store did
// not make (the zero handle, another store's, another value): it fails
// closed with errForeignHandle, never a session read under other keys.
func TestForeignHandle(t *testing.T) {
	r := redistest.New(t)
	s, err := New(r.Client, Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	other, err := New(r.Client, Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	ref := token.SessionRef{JTI: "1", Subject: "svc", Client: "svc"}
	if _, err := s.Session(t.Context(), s.Handle(ref)); err != nil {
		t.Fatalf("Session of its own handle: %v", err)
	}
	k := s.keys(ref.Subject, ref.Client, ref.JTI)
	for name, h := range map[string]token.SessionHandle{
		"zero": {}, "another store's": other.Handle(ref), "keys by value": token.NewSessionHandle(k),
	} {
		if _, err := s.Session(t.Context(), h); !errors.Is(err, errForeignHandle) {
			t.Errorf("Session of %s handle: %v, want errForeignHandle", name, err)
		}
	}
}

// TestKeys: the keys of a JWT, made in one string, are the ones the
// package doc draws.
func TestKeys(t *testing.T) {
	s := &Store{prefix: "st:"}
	k := s.keys("alice", "gateway", "118251258602614784")
	if k.record != "st:{alice}:118251258602614784" || k.gen != "st:{alice}:gen" || k.client != "st:client:{gateway}" {
		t.Errorf("keys = %q, %q, %q; want st:{alice}:118251258602614784, st:{alice}:gen, st:client:{gateway}", k.record, k.gen, k.client)
	}
	if got := s.opaqueKey("118251258602614784"); got != "st:o:118251258602614784" {
		t.Errorf("opaqueKey = %q, want st:o:118251258602614784", got)
	}
}
