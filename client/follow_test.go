package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// follower is a Validator following f, closed when t ends.
func follower(t *testing.T, f *feedIssuer, opts client.Options) *client.Validator {
	t.Helper()
	opts.IssuerURL, opts.Mode, opts.RevocationCheck = f.URL, client.Local, client.Follow
	opts.FeedClientID, opts.FeedClientSecret = "feeder", "s3cret"
	opts.Now, opts.Logger = f.clock.Now, slog.New(slog.DiscardHandler)
	v, err := client.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return v
}

// hangGuard bounds a wait for what must come; it is no timing assertion.
const hangGuard = 20 * time.Second

// eventually retries check until it returns nil, within hangGuard.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func wantErr(v *client.Validator, tok string, want error) func() error {
	return func() error {
		_, err := v.Validate(context.Background(), tok)
		if !errors.Is(err, want) {
			return fmt.Errorf("Validate: %v, want %v", err, want)
		}
		return nil
	}
}

// TestFollowRefusesRevoked checks that each kind of revocation the feed
// brings is refused without a call to the issuer, and that tokens it does
// not touch pass, with no call either.
func TestFollowRefusesRevoked(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	v := follower(t, f, client.Options{})
	byJTI := f.token(t, "1001", "alice", "orders-app")
	bySubject := f.token(t, "1002", "bob", "orders-app")
	byClient := f.token(t, "1003", "carol", "partner")
	other := f.token(t, "1004", "dave", "orders-app")
	for _, tok := range []string{byJTI, bySubject, byClient, other} {
		if _, err := v.Validate(t.Context(), tok); err != nil {
			t.Fatalf("before any revocation: %v", err)
		}
	}
	later := clk.Now().Add(time.Minute).UnixMilli() // well past the tokens' iat and the leeway
	f.revoke("t", "1001", clk.Now().UnixMilli(), false)
	f.revoke("s", "bob", later, false)
	f.revoke("c", "partner", later, false)
	for _, tok := range []string{byJTI, bySubject, byClient} {
		eventually(t, "a revoked token", wantErr(v, tok, client.ErrInvalidToken))
	}
	if _, err := v.Validate(t.Context(), other); err != nil {
		t.Errorf("a token no revocation touches: %v", err)
	}
	if n := f.requests("/token/validate"); n != 0 {
		t.Errorf("%d calls to /token/validate, want none", n)
	}
	// A subject revoked within the leeway of a token's iat: the clocks may
	// disagree, so the feed cannot tell: closed.
	near := f.token(t, "1005", "erin", "orders-app")
	f.revoke("s", "erin", clk.Now().UnixMilli(), false)
	eventually(t, "a token within the leeway of its subject's revocation", wantErr(v, near, client.ErrUnavailable))
}

// TestFollowCascade: an exchanged token is refused when any of its parents
// is revoked, each judged on its own iat: a parent by its jti, a
// grandparent by its client's cutoff after it was issued (and before the
// token was), a parent by its subject's revocation after it was issued
// (and before the token was); the same token without parents passes, and
// no call goes to the issuer.
func TestFollowCascade(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	v := follower(t, f, client.Options{})
	ago := func(d time.Duration) int64 { return clk.Now().Add(-d).Unix() }
	parent := func(jti, clientID string, d time.Duration) jwtpolicy.Parent {
		return jwtpolicy.Parent{ID: jti, ClientID: clientID, IssuedAt: ago(d)}
	}
	cases := []struct {
		name         string
		child, plain string
		revoke       func()
	}{
		{name: "its parent revoked by jti",
			child:  f.token(t, "3001", "alice", "orders-app", parent("2001", "web", 2*time.Minute), parent("1001", "web", 3*time.Minute)),
			plain:  f.token(t, "3001", "alice", "orders-app"),
			revoke: func() { f.revoke("t", "2001", clk.Now().UnixMilli(), false) }},
		{name: "its grandparent's client cut off after the grandparent was issued",
			child:  f.token(t, "3002", "bob", "orders-app", parent("2002", "web", 2*time.Minute), parent("1002", "partner", 3*time.Minute)),
			plain:  f.token(t, "3002", "bob", "orders-app"),
			revoke: func() { f.revoke("c", "partner", clk.Now().Add(-time.Minute).UnixMilli(), false) }},
		{name: "its subject revoked after its parent was issued, before it was",
			child:  f.token(t, "3003", "carol", "orders-app", parent("2003", "web", 2*time.Minute)),
			plain:  f.token(t, "3003", "carol", "orders-app"),
			revoke: func() { f.revoke("s", "carol", clk.Now().Add(-time.Minute).UnixMilli(), false) }},
	}
	for _, c := range cases {
		for _, tok := range []string{c.child, c.plain} {
			if _, err := v.Validate(t.Context(), tok); err != nil {
				t.Fatalf("%s: before any revocation: %v", c.name, err)
			}
		}
	}
	for _, c := range cases {
		c.revoke()
		eventually(t, c.name, wantErr(v, c.child, client.ErrInvalidToken))
		if _, err := v.Validate(t.Context(), c.plain); err != nil {
			t.Errorf("%s: the token without parents: %v", c.name, err)
		}
	}
	if n := f.requests("/token/validate"); n != 0 {
		t.Errorf("%d calls to /token/validate, want none", n)
	}
}

// goStale makes the feed stale: the issuer stops its heartbeats, every
// stream is dropped (so that every heartbeat sent before is read before the
// Validator reconnects), and the clock passes the threshold.
func goStale(t *testing.T, f *feedIssuer) {
	t.Helper()
	f.setFresh(false)
	n := f.streams()
	f.dropStreams()
	eventually(t, "a reconnection", func() error {
		if f.streams() <= n {
			return errors.New("not yet")
		}
		return nil
	})
	f.clock.Add(client.DefaultFeedThreshold + time.Millisecond)
}

// TestFollowStaleFailsClosed checks that with the feed stale every token is
// refused with ErrUnavailable (503), never passed, by default.
func TestFollowStaleFailsClosed(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	v := follower(t, f, client.Options{})
	tok := f.token(t, "1001", "alice", "orders-app")
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	goStale(t, f)
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("stale: %v, want ErrUnavailable", err)
	}
	if n := f.requests("/token/validate"); n != 0 {
		t.Errorf("%d calls to /token/validate with FailClosed", n)
	}
	// Fresh again: it passes again.
	f.setFresh(true)
	eventually(t, "fresh again", wantErr(v, tok, nil))
}

// TestFollowStaleFallsBackRemote checks that with FallbackRemote a stale
// feed sends the token to the issuer, whose answer counts either way.
func TestFollowStaleFallsBackRemote(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	v := follower(t, f, client.Options{WhenStale: client.FallbackRemote})
	tok := f.token(t, "4198400", "alice", "orders-app")
	goStale(t, f)
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatalf("stale, the issuer says valid: %v", err)
	}
	if n := f.requests("/token/validate"); n != 1 {
		t.Errorf("%d calls to /token/validate, want 1", n)
	}
	f.mu.Lock()
	f.remoteRevoked = true
	f.mu.Unlock()
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrInvalidToken) {
		t.Fatalf("stale, the issuer says revoked: %v, want ErrInvalidToken", err)
	}
}

// TestFollowResetSnapshotResume checks that a Validator starts from the
// snapshot (the stream resets without Last-Event-ID), resumes after it, and
// after a new epoch at the issuer fetches the snapshot again and goes on.
func TestFollowResetSnapshotResume(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	f.revoke("t", "1001", clk.Now().UnixMilli(), false)
	old := f.token(t, "1001", "alice", "orders-app")
	v := follower(t, f, client.Options{})
	if _, err := v.Validate(t.Context(), old); !errors.Is(err, client.ErrInvalidToken) {
		t.Fatalf("a token revoked before the Validator started: %v, want ErrInvalidToken (from the snapshot)", err)
	}
	if n := f.requests("/revocations"); n != 1 {
		t.Fatalf("%d snapshots fetched, want 1", n)
	}
	streams := f.streams()
	f.newEpoch("e2")
	f.dropStreams()
	tok := f.token(t, "1002", "alice", "orders-app")
	f.revoke("t", "1002", clk.Now().UnixMilli(), false)
	eventually(t, "revoked in the new epoch", wantErr(v, tok, client.ErrInvalidToken))
	if n := f.requests("/revocations"); n != 2 {
		t.Errorf("%d snapshots fetched, want 2 (one per reset)", n)
	}
	if f.streams() <= streams {
		t.Error("no new stream after the epoch changed")
	}
	if _, err := v.Validate(t.Context(), old); !errors.Is(err, client.ErrInvalidToken) {
		t.Errorf("the first revocation, after the new epoch: %v", err)
	}
}

// TestFollowForgedSET checks that a SET signed by another key (under the
// issuer's kid) is not applied: the stream is dropped, heartbeats that
// vouch for it are not accepted, and the Validator goes stale and fails
// closed rather than take the forged revocation, or anything, as true.
func TestFollowForgedSET(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	v := follower(t, f, client.Options{})
	tok := f.token(t, "1001", "alice", "orders-app")
	n := f.streams()
	f.revoke("t", "1001", clk.Now().UnixMilli(), true)
	eventually(t, "the stream dropped after the forged SET", func() error {
		if f.streams() <= n {
			return errors.New("not yet")
		}
		return nil
	})
	clk.Add(client.DefaultFeedThreshold + time.Millisecond)
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("after a forged SET: %v, want ErrUnavailable (stale), neither revoked nor valid", err)
	}
}

// TestFollowClose checks that Close ends the following: what the issuer
// revokes afterwards is not seen, and the state goes stale and fails
// closed. Close may be called again.
func TestFollowClose(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFeedIssuer(t, clk)
	v := follower(t, f, client.Options{})
	tok := f.token(t, "1001", "alice", "orders-app")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	n := f.streams()
	clk.Add(client.DefaultFeedThreshold + time.Millisecond)
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("after Close: %v, want ErrUnavailable", err)
	}
	if f.streams() != n {
		t.Error("a stream was opened after Close")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFollowOptions checks the options Follow needs.
func TestFollowOptions(t *testing.T) {
	for name, opts := range map[string]client.Options{
		"no credentials": {Mode: client.Local, RevocationCheck: client.Follow},
		"remote mode":    {RevocationCheck: client.Follow, FeedClientID: "a", FeedClientSecret: "b"},
		"bad WhenStale":  {Mode: client.Local, RevocationCheck: client.Follow, FeedClientID: "a", FeedClientSecret: "b", WhenStale: 7},
		"negative threshold": {Mode: client.Local, RevocationCheck: client.Follow, FeedClientID: "a", FeedClientSecret: "b",
			FeedThreshold: -1},
		"negative clock skew": {Mode: client.Local, RevocationCheck: client.Follow, FeedClientID: "a", FeedClientSecret: "b",
			MaxClockSkew: -1},
	} {
		opts.IssuerURL = "http://issuer.test"
		if _, err := client.New(opts); !errors.Is(err, client.ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
	}
	v, err := client.New(client.Options{IssuerURL: "http://issuer.test", Mode: client.Local})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(t.Context()); !errors.Is(err, client.ErrOptions) {
		t.Errorf("Start without Follow: %v, want ErrOptions", err)
	}
	if err := v.Close(); err != nil {
		t.Errorf("Close without Follow: %v", err)
	}
}
