package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// clock is a clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// feedEvent is one revocation the fake issuer serves.
type feedEvent struct {
	ID, Kind, Key   string
	At, Exp, Cutoff int64
	forged          bool // signed with another key under the issuer's kid
}

// feedIssuer is an issuer as a Validator with Follow sees one: its JWKS,
// the revocation feed (stream and snapshot, as package revfeed serves them,
// for client feeder:s3cret) and GET /token/validate (for FallbackRemote:
// every token valid unless remoteRevoked). Tokens are signed with its key.
type feedIssuer struct {
	URL    string
	key    ed25519.PrivateKey
	forger ed25519.PrivateKey
	clock  *clock

	mu            sync.Mutex
	epoch         string
	events        []feedEvent
	fresh         bool
	ageMs         int64
	changed       chan struct{}
	drop          chan struct{} // closed to end every stream
	conns         int           // streams opened
	hits          map[string]int
	remoteRevoked bool
}

const feedHorizonAgo = time.Hour

func newFeedIssuer(t *testing.T, clk *clock) *feedIssuer {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	_, forger, _ := ed25519.GenerateKey(rand.Reader)
	f := &feedIssuer{key: key, forger: forger, clock: clk, epoch: "e1", fresh: true, ageMs: 10,
		changed: make(chan struct{}), drop: make(chan struct{}), hits: map[string]int{}}
	jwks := `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"sig","alg":"EdDSA","kid":"k1","x":"` +
		base64.RawURLEncoding.EncodeToString(pub) + `"}]}`
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(jwks)) })
	mux.HandleFunc("/revocations/events", f.serveEvents)
	mux.HandleFunc("/revocations", f.serveSnapshot)
	mux.HandleFunc("/token/validate", f.serveValidate)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(f.dropStreams) // before srv.Close, which waits for them
	f.URL = srv.URL
	return f
}

func (f *feedIssuer) requests(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[path]
}

func (f *feedIssuer) changeLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// revoke appends an event of kind for key at (Unix ms).
func (f *feedIssuer) revoke(kind, key string, at int64, forged bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := feedEvent{ID: fmt.Sprintf("%s-%d-0", f.epoch, 1000+len(f.events)), Kind: kind, Key: key, At: at, forged: forged}
	switch kind {
	case "t":
		ev.Exp = f.clock.Now().Add(time.Hour).Unix()
	case "c":
		ev.Cutoff = at
	}
	f.events = append(f.events, ev)
	f.changeLocked()
}

func (f *feedIssuer) setFresh(fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fresh = fresh
	f.changeLocked()
}

// dropStreams ends every stream open; the Validator reconnects.
func (f *feedIssuer) dropStreams() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.drop)
	f.drop = make(chan struct{})
}

// newEpoch gives the state a new epoch (a resync at the issuer): the events
// keep their keys under new IDs.
func (f *feedIssuer) newEpoch(epoch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch = epoch
	for i := range f.events {
		f.events[i].ID = fmt.Sprintf("%s-%d-0", epoch, 1000+i)
	}
	f.changeLocked()
}

func (f *feedIssuer) streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns
}

func (f *feedIssuer) signJWT(typ string, claims jwt.Claims, key ed25519.PrivateKey) string {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"], t.Header["typ"] = "k1", typ
	s, err := t.SignedString(key)
	if err != nil {
		panic(err)
	}
	return s
}

func (f *feedIssuer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if id, secret, ok := r.BasicAuth(); !ok || id != "feeder" || secret != "s3cret" {
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	return true
}

func (f *feedIssuer) lastLocked() string {
	if len(f.events) == 0 {
		return f.epoch + "-0-0"
	}
	return f.events[len(f.events)-1].ID
}

func (f *feedIssuer) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	f.conns++
	connected := f.clock.Now() // with conns: a test that sees the stream moves the clock after
	last, next := r.Header.Get("Last-Event-ID"), -1
	if last == f.epoch+"-0-0" {
		next = 0
	}
	for i, ev := range f.events {
		if ev.ID == last {
			next = i + 1
		}
	}
	drop := f.drop
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	if next < 0 {
		fmt.Fprint(w, "event: reset\ndata: {}\n\n")
		return
	}
	fmt.Fprintf(w, "event: stream\ndata: %s\n\n", f.signJWT("revocation-stream+jwt", jwt.MapClaims{"iss": f.URL,
		"iat": connected.Unix(), "iat_ms": connected.UnixMilli(), "nonce": r.URL.Query().Get("nonce")}, f.key))
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		evs := append([]feedEvent(nil), f.events[next:]...)
		next = len(f.events)
		fresh, changed, hbLast := f.fresh, f.changed, f.lastLocked()
		beat := f.clock.Now().UnixMilli()
		epoch, age := f.epoch, f.ageMs
		f.mu.Unlock()
		for _, ev := range evs {
			key := f.key
			if ev.forged {
				key = f.forger
			}
			uri := map[string]string{"t": "token-revoked", "s": "subject-revoked", "c": "client-revoked"}[ev.Kind]
			set := f.signJWT("secevent+jwt", jwt.MapClaims{"iss": f.URL, "iat": f.clock.Now().Unix(), "jti": ev.ID,
				"events": map[string]any{"https://snowtoken.dev/secevent/" + uri: map[string]any{
					"id": ev.ID, "kind": ev.Kind, "key": ev.Key, "at": ev.At, "exp": ev.Exp, "cutoff": ev.Cutoff}}}, key)
			fmt.Fprintf(w, "id: %s\nevent: revoked\ndata: %s\n\n", ev.ID, set)
		}
		if fresh {
			hb := f.signJWT("revocation-heartbeat+jwt", jwt.MapClaims{"iss": f.URL, "iat": f.clock.Now().Unix(),
				"iat_ms": beat, "epoch": epoch, "last": hbLast, "age_ms": age, "horizon": 0}, f.key)
			fmt.Fprintf(w, "event: heartbeat\ndata: %s\n\n", hb)
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-drop:
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

func (f *feedIssuer) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	tokens, subjects, clients := []any{}, []any{}, []any{}
	for _, ev := range f.events {
		switch ev.Kind {
		case "t":
			tokens = append(tokens, map[string]any{"jti": ev.Key, "exp": ev.Exp, "at": ev.At})
		case "s":
			subjects = append(subjects, map[string]any{"sub": ev.Key, "at": ev.At})
		case "c":
			clients = append(clients, map[string]any{"client_id": ev.Key, "cutoff": ev.Cutoff, "at": ev.At})
		}
	}
	now := f.clock.Now()
	snap := f.signJWT("revocation-snapshot+jwt", jwt.MapClaims{"iss": f.URL, "iat": now.Unix(), "iat_ms": now.UnixMilli(),
		"nonce": r.URL.Query().Get("nonce"), "epoch": f.epoch, "last": f.lastLocked(), "horizon": now.Add(-feedHorizonAgo).UnixMilli(), "fresh": f.fresh,
		"tokens": tokens, "subjects": subjects, "clients": clients}, f.key)
	w.Header().Set("Content-Type", "application/jwt")
	_, _ = w.Write([]byte(snap))
}

func (f *feedIssuer) serveValidate(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	revoked := f.remoteRevoked
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if revoked {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_token","error_description":"revoked"}`))
		return
	}
	now := f.clock.Now()
	_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "client_id": "orders-app",
		"scope": "orders:read", "iss": f.URL, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "4198400", "worker_id": 1})
}

// token is a token of f for subject, issued at the clock's now.
func (f *feedIssuer) token(t *testing.T, jti, subject, clientID string) string {
	t.Helper()
	now := f.clock.Now()
	return f.signJWT("at+jwt", jwtpolicy.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.URL, Subject: subject, ID: jti,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
		ClientID: clientID, Scope: "orders:read",
	}, f.key)
}

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
